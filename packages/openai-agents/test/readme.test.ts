import { describeReadmeExamples } from '@cairn/test-support';

// `@cairn/openai-agents` in the examples is this package's source (vitest.config.ts).
describeReadmeExamples(new URL('../README.md', import.meta.url), { minExamples: 2 });
