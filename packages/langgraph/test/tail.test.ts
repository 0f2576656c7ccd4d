// A saver that has not read a namespace yet reads only the tail of its log that a checkpoint's
// tuple needs: these logs put what the tuple needs far back, past the first pages it reads.
import { join } from 'node:path';
import { createSqliteStore } from '@cairn/store-sqlite';
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  type ChannelVersions,
  type Checkpoint,
  emptyCheckpoint,
  uuid6,
} from '@langchain/langgraph-checkpoint';
import { afterAll, describe, expect, it } from 'vitest';
import { CairnSaver } from '../src/index.js';
import { removeTempDirs, tempDir } from './stores.js';

afterAll(removeTempDirs);

const thread = (checkpoint_id?: string): RunnableConfig => ({
  configurable: { thread_id: 't', checkpoint_ns: '', ...(checkpoint_id ? { checkpoint_id } : {}) },
});

/** A chain of checkpoints, each writing `n`; `user` is written by the first one only. */
async function chain(saver: CairnSaver, length: number, first: Partial<Checkpoint> = {}) {
  const ids: string[] = [];
  let parent: string | undefined;
  for (let i = 0; i < length; i++) {
    const versions: ChannelVersions = i === 0 ? { user: 1, n: 1 } : { n: i + 1 };
    const checkpoint: Checkpoint = {
      ...emptyCheckpoint(),
      id: i === 0 && first.id ? first.id : uuid6(i),
      channel_values: { user: 'ada', n: i },
      channel_versions: { user: 1, n: i + 1 },
    };
    await saver.put(thread(parent), checkpoint, { source: 'loop', step: i, parents: {} }, versions);
    parent = checkpoint.id;
    ids.push(parent);
  }
  return ids;
}

describe('getTuple through a saver that has not read the thread', () => {
  it('follows the lineage back to a channel written once, long ago', async () => {
    const store = createSqliteStore({ path: join(tempDir(), 'tail.db') });
    const saver = new CairnSaver(store);
    const ids = await chain(saver, 60);
    for (const id of [undefined, ids[59], ids[30], ids[0]]) {
      const fresh = await new CairnSaver(store).getTuple(thread(id));
      expect(fresh?.checkpoint.channel_values).toEqual({
        user: 'ada',
        n: ids.indexOf(fresh!.checkpoint.id),
      });
      expect(fresh).toEqual(await saver.getTuple(thread(id)));
    }
    await store.close();
  });

  it('finds the writes stored before their checkpoint', async () => {
    const store = createSqliteStore({ path: join(tempDir(), 'early.db') });
    const early = uuid6(-3);
    // Writes for a checkpoint that another process stores only later, after 60 others.
    await new CairnSaver(store).putWrites(thread(early), [['n', 'early']], 'task-1');
    const saver = new CairnSaver(store);
    await chain(saver, 60);
    const last = (await saver.getTuple(thread()))!;
    // It writes every channel: its tuple needs no other checkpoint, only its writes.
    const versions = { user: 2, n: 61 };
    const checkpoint = {
      ...emptyCheckpoint(),
      id: early,
      channel_values: { user: 'bob', n: 60 },
      channel_versions: versions,
    };
    await saver.put(last.config, checkpoint, { source: 'loop', step: 60, parents: {} }, versions);
    const fresh = await new CairnSaver(store).getTuple(thread(early));
    expect(fresh?.pendingWrites).toEqual([['task-1', 'n', 'early']]);
    expect(fresh).toEqual(await saver.getTuple(thread(early)));
    expect((await new CairnSaver(store).getTuple(thread()))?.checkpoint.id).toBe(
      (await saver.getTuple(thread()))?.checkpoint.id,
    );
    await store.close();
  });
});
