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
export { type RunRecord, type RunResult, runKey, ThreadRun } from './run.js';
export { type SnapshotPolicy, stateAsOf } from './state-log.js';
export {
  CairnThread,
  type MessageInput,
  type NoState,
  type OpenThreadOptions,
  openThread,
  type PendingMessage,
  type SaveOptions,
} from './thread.js';
export { ThreadTurn } from './turn.js';

import type { StateSchema } from '@cairn/core';
import type { CairnThread, NoState } from './thread.js';
/** The engine type for a schema: `Thread<typeof Research>`; `Thread` alone has no state. */
export type Thread<S extends StateSchema<any> = NoState> = CairnThread<S>;
