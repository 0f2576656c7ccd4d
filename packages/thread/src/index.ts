export { openThread, CairnThread, type MessageInput, type OpenThreadOptions, type PendingMessage, type SaveOptions } from './thread.js';
export { ThreadTurn } from './turn.js';
export { ThreadRun, runKey, type RunRecord, type RunResult } from './run.js';
export { forkBranchName } from './branch-names.js';
export type { SnapshotPolicy } from './state-log.js';
export type { BranchEvent, CheckpointEvent, MessagesEvent, StateEvent, ThreadEvent, ThreadEventSource, ThreadListener } from './events.js';
export {
  recentMessagesProvider,
  threadStateProvider,
  type ThreadProvider,
  type ThreadProviderResult,
} from './providers.js';

import type { StateSchema } from '@cairn/core';
import type { CairnThread } from './thread.js';
/** The engine type for a schema: `Thread<typeof Research>`. */
export type Thread<S extends StateSchema<any>> = CairnThread<S>;
