import { defineState, field, reducers } from '@cairn/core';

export const Research = defineState({
  objective: field<string>(),
  keyInsights: field<string[]>({ reducer: reducers.appendUnique, default: () => [] }),
  notes: field<Record<string, string>>({ reducer: reducers.mergeRecord, default: () => ({}) }),
  counter: field<number>({ default: () => 0 }),
  blob: field<string>(),
  files: field<string[]>({ scope: 'turn', reducer: reducers.append, default: () => [] }),
  phase: field<string>({ scope: 'turn', default: () => 'idle' }),
});
