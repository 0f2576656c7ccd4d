import { describeReadmeExamples } from '@cairn/test-support';

// `@cairn/ai-sdk` in the examples is this package's source (vitest.config.ts).
describeReadmeExamples(new URL('../README.md', import.meta.url), { minExamples: 3 });
