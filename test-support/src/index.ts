export { describeReadmeExamples } from './readme.js';
