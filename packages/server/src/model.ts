/**
 * The resources as the Agent Protocol shows them (snake_case, ISO timestamps), with the
 * owner the server keeps beside each (never shown).
 */
export type Json = Record<string, unknown>;

export interface Owned {
  /** The identity of the caller that created it; null without auth (and for the graphs' assistants). */
  owner?: string | null;
}

export interface Assistant extends Owned {
  assistant_id: string;
  graph_id: string;
  name: string;
  description: string | null;
  config: Json;
  context: unknown;
  metadata: Json;
  version: number;
  created_at: string;
  updated_at: string;
}

export type ThreadStatus = 'idle' | 'busy' | 'interrupted' | 'error';

export interface Thread extends Owned {
  thread_id: string;
  created_at: string;
  updated_at: string;
  metadata: Json;
  status: ThreadStatus;
  config: Json;
  values?: unknown;
  interrupts?: Record<string, unknown>;
}

export type RunStatus = 'pending' | 'running' | 'error' | 'success' | 'timeout' | 'interrupted';
export type MultitaskStrategy = 'reject' | 'rollback' | 'interrupt' | 'enqueue';
export const MULTITASK_STRATEGIES: readonly MultitaskStrategy[] = [
  'reject',
  'rollback',
  'interrupt',
  'enqueue',
];
export const STREAM_MODES = [
  'values',
  'messages',
  'messages-tuple',
  'custom',
  'updates',
  'events',
  'debug',
  'tasks',
  'checkpoints',
] as const;
export type StreamMode = (typeof STREAM_MODES)[number];

export interface RunKwargs {
  input?: unknown;
  command?: Json | null;
  stream_mode: StreamMode[];
  interrupt_before?: '*' | string[];
  interrupt_after?: '*' | string[];
  config: Json & { configurable?: Json };
  context?: unknown;
  subgraphs: boolean;
  resumable: boolean;
  /** A stateless run's thread, deleted when the run ends. */
  temporary: boolean;
  webhook?: string | null;
}

export interface Run extends Owned {
  run_id: string;
  thread_id: string;
  assistant_id: string;
  created_at: string;
  updated_at: string;
  status: RunStatus;
  metadata: Json;
  kwargs: RunKwargs;
  multitask_strategy: MultitaskStrategy;
}

export interface Cron extends Owned {
  cron_id: string;
  assistant_id: string;
  thread_id: string | null;
  schedule: string;
  payload: Json;
  user_id: string | null;
  end_time: string | null;
  next_run_date: string;
  metadata: Json;
  created_at: string;
  updated_at: string;
}

/** The resource as the API shows it: without the owner. */
export function shown<T extends Owned>(value: T): Omit<T, 'owner'> {
  const { owner: _, ...rest } = value;
  return rest;
}

/** Keeps only the fields named in `select`, when given. */
export function selectFields<T extends object>(value: T, select: string[] | undefined): Partial<T> {
  if (!select) return value;
  return Object.fromEntries(
    Object.entries(value).filter(([k]) => select.includes(k)),
  ) as Partial<T>;
}
