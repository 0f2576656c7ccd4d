import type { Store } from '@cairn/store';
import {
  Checksums,
  checksums,
  DUMP_TABLES,
  type DumpTable,
  pages,
  ThreadWriter,
  threadIdsOldestFirst,
  writeEmbeddingSpace,
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

/**
 * Copies everything of `from` into `to` (empty, or holding an earlier interrupted copy):
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
  await writeEmbeddingSpace(to, await from.getEmbeddingSpace());
  const ids = await threadIdsOldestFirst(from);
  const present = new Set(await threadIdsOldestFirst(to));
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
    await to.restoreLeases(page);
    for (const l of page) read.tables.leases.add(l);
    leases += page.length;
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
