export { describeReadmeExamples } from './readme.js';
export { sqliteTestStore } from './stores.js';
