import type { JsonObject } from '@cairn/core';
import type { Store } from '@cairn/store';

/** The store's entry collections the server keeps its resources in. */
export const COLLECTIONS = {
  assistants: 'langgraph.assistants',
  assistantVersions: 'langgraph.assistant_versions',
  threads: 'langgraph.threads',
  runs: 'langgraph.runs',
  /** The runs not finished yet: pending, or claimed by a worker (run-queue.ts). */
  queue: 'langgraph.queue',
  /** Each run's streamed events (stream-log.ts). */
  events: 'langgraph.events',
  crons: 'langgraph.crons',
} as const;

/** An entry's value and the version to compare against when writing it back. */
export interface Versioned<T> {
  value: T;
  version: number;
}

/**
 * One collection of entries holding values of type `T`: the reads and compare-and-set
 * writes each resource module makes, in one place.
 */
export class Collection<T extends object> {
  constructor(
    readonly store: Store,
    readonly name: string,
  ) {}

  async get(id: string): Promise<Versioned<T> | null> {
    const e = await this.store.getEntry(this.name, id);
    return e && { value: e.data as T, version: e.version };
  }

  /**
   * Writes the value: `expectedVersion` null only if new, a number only over that
   * version (`CONFLICT` otherwise), left out whatever is stored.
   */
  async put(
    id: string,
    value: T,
    options: { group?: string | null; expectedVersion?: number | null } = {},
  ): Promise<Versioned<T>> {
    const [e] = await this.store.putEntries([
      { collection: this.name, id, data: value as unknown as JsonObject, ...options },
    ]);
    return { value, version: e!.version };
  }

  /** Every entry (of `group`), by id, read a page at a time. */
  async *scan(group?: string): AsyncGenerator<Versioned<T> & { id: string }> {
    let afterId: string | undefined;
    for (;;) {
      const page = await this.store.listEntries(this.name, {
        limit: 500,
        ...(group === undefined ? {} : { group }),
        ...(afterId === undefined ? {} : { afterId }),
      });
      for (const e of page) yield { id: e.id, value: e.data as T, version: e.version };
      if (page.length < 500) return;
      afterId = page.at(-1)!.id;
    }
  }

  async all(group?: string): Promise<T[]> {
    const out: T[] = [];
    for await (const e of this.scan(group)) out.push(e.value);
    return out;
  }

  delete(ids: string[]): Promise<number> {
    return this.store.deleteEntries(this.name, { ids });
  }

  deleteGroup(group: string): Promise<number> {
    return this.store.deleteEntries(this.name, { group });
  }
}

/** Whether `subset`'s keys all hold in `superset`, objects compared key by key (JSONB `@>` for objects). */
export function contains(superset: unknown, subset: Record<string, unknown> | undefined): boolean {
  if (subset === undefined) return true;
  if (typeof superset !== 'object' || superset === null) return Object.keys(subset).length === 0;
  const sup = superset as Record<string, unknown>;
  return Object.entries(subset).every(([k, v]) => {
    const have = sup[k];
    if (typeof v === 'object' && v !== null && !Array.isArray(v))
      return contains(have, v as Record<string, unknown>);
    return JSON.stringify(have) === JSON.stringify(v);
  });
}

export const nowIso = () => new Date().toISOString();
