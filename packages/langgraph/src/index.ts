export { CairnSaver, type CairnSaverOptions, namespaceBranch } from './cairn-saver.js';
