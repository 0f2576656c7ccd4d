export { forkBranchName } from './branch-names.js';
export type {
  BranchEvent,
  CheckpointEvent,
  MessagesEvent,
  StateEvent,
  ThreadEvent,
  ThreadEventSource,
  ThreadListener,
} from './events.js';
export {
  messageText,
  recentMessagesProvider,
  threadStateProvider,
} from './providers.js';
export {
  DEFAULT_MAX_RETRIES,
  type RetryOptions,
  retryAttempts,
  retryOnConflict,
} from './retry.js';
export { type RunRecord, type RunResult, runKey, ThreadRun } from './run.js';
export { type SnapshotPolicy, stateAsOf } from './state-log.js';
export {
  CairnThread,
  type MessageInput,
  type OpenThreadOptions,
  openThread,
  type PendingMessage,
  type SaveOptions,
} from './thread.js';
export { ThreadTurn } from './turn.js';

import type { StateSchema } from '@cairn/core';
import type { CairnThread } from './thread.js';
/** The engine type for a schema: `Thread<typeof Research>`. */
export type Thread<S extends StateSchema<any>> = CairnThread<S>;
