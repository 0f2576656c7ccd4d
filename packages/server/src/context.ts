import type { CairnSaver, CairnStore } from '@cairn/langgraph';
import type { Store } from '@cairn/store';
import { COLLECTIONS, Collection } from './collection.js';
import type { GraphRegistry } from './graphs.js';
import type { Assistant, Cron, Run, Thread } from './model.js';
import { RunQueue } from './run-queue.js';
import { StreamLog } from './stream-log.js';

/** An assistant's earlier version, kept for `versions` and `latest`. */
export type AssistantVersion = Omit<Assistant, 'updated_at'>;

/** What every resource module works on: the store, its collections, the graphs. */
export class ServerContext {
  readonly assistants: Collection<Assistant>;
  readonly assistantVersions: Collection<AssistantVersion>;
  readonly threads: Collection<Thread>;
  readonly runs: Collection<Run>;
  readonly crons: Collection<Cron>;
  readonly queue: RunQueue;
  readonly log: StreamLog;

  constructor(
    readonly store: Store,
    readonly saver: CairnSaver,
    readonly memory: CairnStore,
    readonly graphs: GraphRegistry,
    leaseMs: number,
  ) {
    this.assistants = new Collection(store, COLLECTIONS.assistants);
    this.assistantVersions = new Collection(store, COLLECTIONS.assistantVersions);
    this.threads = new Collection(store, COLLECTIONS.threads);
    this.runs = new Collection(store, COLLECTIONS.runs);
    this.crons = new Collection(store, COLLECTIONS.crons);
    this.queue = new RunQueue(store, leaseMs);
    this.log = new StreamLog(store);
  }

  /** The graph of `graphId` on the server's checkpointer (none for a stateless run) and store. */
  graph(graphId: string, config: Record<string, unknown>, stateless = false) {
    return this.graphs.get(graphId, config, {
      checkpointer: stateless ? null : this.saver,
      store: this.memory,
    });
  }
}
