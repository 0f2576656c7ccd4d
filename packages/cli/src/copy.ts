import type { Thread } from '@cairn/core';
import type { Store } from '@cairn/store';
import { CliError } from './database.js';
import {
  Checksums,
  checksums,
  DUMP_TABLES,
  type DumpTable,
  isLive,
  pages,
  sameRecord,
  ThreadWriter,
  threadsOldestFirst,
  writeEmbeddingSpace,
  writeLeases,
  writeMemories,
} from './dump.js';

/** One table's result of the check after a copy. */
export interface TableCheck {
  table: DumpTable;
  source: { count: number; checksum: string };
  target: { count: number; checksum: string };
  ok: boolean;
}

export interface CopyResult {
  /** Threads written now, and those the target had already (from an earlier, interrupted run). */
  threads: { written: number; skipped: number };
  memories: { written: number; skipped: number };
  leases: number;
  verified: TableCheck[];
}

export interface CopyOptions {
  /** Threads per transaction (default 100, fewer when they hold many messages). */
  batchThreads?: number;
  /** Called as work is done: `done` of `total` units (a thread or a memory is a unit). */
  onProgress?: (done: number, total: number) => void;
}

const NOT_A_COPY =
  'copy needs an empty target or an earlier, interrupted copy of the same source; import a dump to merge databases';

/**
 * Refuses, before anything is written, a target that is neither empty nor an earlier copy
 * of `from`: one holding a thread, memory or lease the source does not have, one of them
 * unlike the source's, or another embedding space. Returns the ids of the threads it has.
 */
async function checkTarget(from: Store, to: Store, sourceThreads: Thread[]): Promise<Set<string>> {
  const source = new Map(sourceThreads.map((t) => [t.id, t]));
  const present = new Set<string>();
  for (const t of await threadsOldestFirst(to)) {
    const s = source.get(t.id);
    if (!s)
      throw new CliError(
        `the target holds thread ${show(t.id)}, the source does not: ${NOT_A_COPY}`,
      );
    if (!sameRecord(s, t))
      throw new CliError(
        `the target's thread ${show(t.id)} differs from the source's: ${NOT_A_COPY}`,
      );
    present.add(t.id);
  }
  const [a, b] = [await from.getEmbeddingSpace(), await to.getEmbeddingSpace()];
  if (b?.embedderId && (a?.embedderId !== b.embedderId || a.dimensions !== b.dimensions))
    throw new CliError(
      `the target's embedding space is ${b.embedderId} (${b.dimensions} dimensions), the source's ${a?.embedderId ? `${a.embedderId} (${a.dimensions})` : 'none'}: ${NOT_A_COPY}`,
    );
  for await (const page of pages((cursor) => to.scanMemories({ limit: 1000, cursor }))) {
    const ids = page.map((m) => m.id);
    const theirs = new Map(
      (await from.listMemories({ ids }, { limit: ids.length })).map((m) => [m.id, m]),
    );
    for (const m of page) {
      const s = theirs.get(m.id);
      if (!s)
        throw new CliError(
          `the target holds memory ${show(m.id)}, the source does not: ${NOT_A_COPY}`,
        );
      if (!sameRecord(s, m))
        throw new CliError(
          `the target's memory ${show(m.id)} differs from the source's: ${NOT_A_COPY}`,
        );
    }
  }
  for await (const page of pages((cursor) => to.listLeases({ limit: 1000, cursor }))) {
    for (const l of page) {
      const s = await from.getLease(l.key);
      if (!s)
        throw new CliError(
          `the target holds lease ${show(l.key)}, the source does not: ${NOT_A_COPY}`,
        );
      // A lease the target holds live is someone's: a copy never takes or extends it.
      if (isLive(l) && !sameRecord(s, l))
        throw new CliError(
          `the target's lease ${show(l.key)} is held by ${show(l.owner)} until ${new Date(l.expiresAt).toISOString()}, unlike the source's: ${NOT_A_COPY}`,
        );
    }
  }
  return present;
}

const show = JSON.stringify;

/**
 * Copies everything of `from` into `to` (empty, or holding an earlier interrupted copy:
 * anything else is refused before a thing is written):
 * whole threads in transactions of a batch, then leases and memories in batches; a thread
 * or memory the target has already is skipped, so re-running after a kill finishes the job
 * without duplicates. Then counts and checksums every table on both sides: the source as
 * read during the copy (every thread is read, those skipped too), the target read again.
 */
export async function copyStore(
  from: Store,
  to: Store,
  options: CopyOptions = {},
): Promise<CopyResult> {
  const sourceThreads = await threadsOldestFirst(from);
  const present = await checkTarget(from, to, sourceThreads);
  await writeEmbeddingSpace(to, await from.getEmbeddingSpace());
  const ids = sourceThreads.map((t) => t.id);
  const total = ids.length + (await from.countMemories());
  let done = 0;
  const tick = (n: number) => {
    done += n;
    options.onProgress?.(done, total);
  };
  tick(0);
  const read = new Checksums();
  const writer = new ThreadWriter(to, true, options.batchThreads);
  for (const id of ids) {
    const r = await from.exportThread(id);
    if (r) {
      read.addThread(r);
      if (present.has(id)) writer.skipped++;
      else await writer.add(r);
    }
    tick(1);
  }
  await writer.flush();
  let leases = 0;
  for await (const page of pages((cursor) => from.listLeases({ limit: 1000, cursor }))) {
    leases += (await writeLeases(to, page)).written;
    for (const l of page) read.tables.leases.add(l);
  }
  const memories = { written: 0, skipped: 0 };
  for await (const page of pages((cursor) => from.scanMemories({ limit: 1000, cursor }))) {
    for (const m of page) read.tables.memories.add(m);
    const n = await writeMemories(to, page, true);
    memories.written += n;
    memories.skipped += page.length - n;
    tick(page.length);
  }
  const a = read.tables;
  const b = (await checksums(to)).tables;
  const verified = DUMP_TABLES.map((table) => {
    const source = { count: a[table].count, checksum: a[table].hex };
    const target = { count: b[table].count, checksum: b[table].hex };
    return {
      table,
      source,
      target,
      ok: source.count === target.count && source.checksum === target.checksum,
    };
  });
  return {
    threads: { written: writer.written.threads, skipped: writer.skipped },
    memories,
    leases,
    verified,
  };
}
