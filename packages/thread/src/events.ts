import type { Message } from '@cairn/core';

/** Where an event came from: this engine, or another engine or process (via the store). */
export type ThreadEventSource = 'local' | 'remote';

/** The active branch got new messages (its head moved). */
export interface MessagesEvent {
  kind: 'messages';
  threadId: string;
  branchId: string;
  headMessageId: string | null;
  /** The messages this engine just saved (local events only). */
  messages?: Message[];
  source: ThreadEventSource;
}

/** The active branch's thread state changed. */
export interface StateEvent {
  kind: 'state';
  threadId: string;
  branchId: string;
  version: number;
  /** Field names that changed (local events only; remote events list none). */
  changed: string[];
  source: ThreadEventSource;
}

/** A branch was created or the active branch changed. */
export interface BranchEvent {
  kind: 'branch';
  threadId: string;
  branchId: string | null;
  name?: string;
  action: 'created' | 'switched' | 'changed';
  source: ThreadEventSource;
}

/** A checkpoint was saved. */
export interface CheckpointEvent {
  kind: 'checkpoint';
  threadId: string;
  name?: string;
  messageId?: string;
  source: ThreadEventSource;
}

export type ThreadEvent = MessagesEvent | StateEvent | BranchEvent | CheckpointEvent;
export type ThreadListener = (event: ThreadEvent) => void;
