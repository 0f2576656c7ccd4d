export { COMMANDS, run } from './cli.js';
export type { Io } from './output.js';
