import { describeReadmeExamples } from '@cairn/test-support';

describeReadmeExamples(new URL('../README.md', import.meta.url), { minExamples: 1 });
