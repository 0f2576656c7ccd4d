import { defineState, field, reducers, type StateOf } from '@cairn/core';
import type { Discovery, Evidence } from './research-agent.js';

/** What a literature task left in the state when it finished. */
export interface TaskOutcome {
  facet: string;
  iteration: number;
  passages: number;
  findings: number;
  documents: string[];
}

/** A file a user uploaded into the conversation (its text went to memory). */
export interface DatasetRef {
  name: string;
  memoryId: string;
  uploadedBy: string;
  characters: number;
}

/** A planned task, as the state records it. */
export interface PlanItem {
  id: string;
  facet: string;
  query: string;
}

/** One passage a literature task kept during the current turn. */
export interface TurnFinding extends Evidence {
  taskId: string;
}

/**
 * The research assistant's typed state. Thread-scoped fields live with the branch (a
 * rewind rewinds them too); `turnFindings` is turn-scoped and starts empty each turn.
 *
 * - `keyInsights` uses `appendUnique`: the same insight found twice is kept once.
 * - `discoveries` and `tasks` use `mergeRecord`: entries keyed by id, so parallel tasks
 *   each add their own key and none overwrites another.
 * - `sourcesConsulted` uses `union`.
 */
export const Research = defineState({
  objective: field<string>(),
  currentObjective: field<string>(),
  title: field<string>(),
  iteration: field<number>({ default: () => 0 }),
  plan: field<PlanItem[]>({ default: () => [] }),
  tasks: field<Record<string, TaskOutcome>>({ reducer: reducers.mergeRecord, default: () => ({}) }),
  keyInsights: field<string[]>({ reducer: reducers.appendUnique, default: () => [] }),
  hypothesis: field<string>(),
  methodology: field<string>(),
  nextObjective: field<string>(),
  discoveries: field<Record<string, Discovery>>({
    reducer: reducers.mergeRecord,
    default: () => ({}),
  }),
  sourcesConsulted: field<string[]>({ reducer: reducers.union, default: () => [] }),
  uploadedDatasets: field<DatasetRef[]>({ reducer: reducers.appendUnique, default: () => [] }),
  turnFindings: field<TurnFinding[]>({
    scope: 'turn',
    reducer: reducers.append,
    default: () => [],
  }),
});

export type ResearchState = StateOf<typeof Research>;
