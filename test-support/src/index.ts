export { CHROMIUM, chromiumTestsRun, launchChromium } from './chromium.js';
export { describeReadmeExamples } from './readme.js';
export { sqliteTestStore } from './stores.js';
