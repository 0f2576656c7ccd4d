// Two processes writing one thread in turns: each saver writes against the log it has folded,
// so a write after the other's is a CONFLICT that it reads past, and a write after the other
// deleted the thread makes it again. Compared with one MemorySaver taking both parts.
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  type BaseCheckpointSaver,
  type Checkpoint,
  emptyCheckpoint,
  MemorySaver,
  uuid6,
} from '@langchain/langgraph-checkpoint';
import { afterAll, describe, expect, it } from 'vitest';
import { CairnSaver } from '../src/index.js';
import { closePglite, removeTempDirs, storeKinds } from './stores.js';

const kinds = await storeKinds();
afterAll(async () => {
  await closePglite();
  removeTempDirs();
});

const at = (checkpoint_id?: string): RunnableConfig => ({
  configurable: { thread_id: 't', checkpoint_ns: '', ...(checkpoint_id ? { checkpoint_id } : {}) },
});

const IDS = Array.from({ length: 6 }, (_, i) => uuid6(i));

/** Checkpoint `i` of a chat: `i` in `n`, the conversation so far in `messages`. */
function checkpoint(i: number): Checkpoint {
  const messages = Array.from({ length: i + 1 }, (_, k) =>
    k % 2 === 0
      ? new HumanMessage({ id: `h${k}`, content: `q${k}` })
      : new AIMessage({ id: `a${k}`, content: `r${k}` }),
  );
  return {
    ...emptyCheckpoint(),
    id: IDS[i]!,
    channel_values: { n: i, messages },
    channel_versions: { n: i + 1, messages: i + 1 },
  };
}

/** What a saver gives back of thread `t`: each checkpoint's values, parent and writes. */
async function read(saver: BaseCheckpointSaver) {
  const out: unknown[] = [];
  for await (const t of saver.list(at())) {
    out.push({
      id: t.checkpoint.id,
      parent: t.parentConfig?.configurable?.checkpoint_id,
      values: JSON.parse(JSON.stringify(t.checkpoint.channel_values)),
      writes: JSON.parse(JSON.stringify(t.pendingWrites)),
    });
  }
  return out;
}

/** The script, `a` and `b` taking turns (a MemorySaver plays both). */
async function script(a: BaseCheckpointSaver, b: BaseCheckpointSaver) {
  const ids: string[] = [];
  const put = async (saver: BaseCheckpointSaver, i: number) => {
    const c = checkpoint(i);
    await saver.put(
      at(ids.at(-1)),
      c,
      { source: 'loop', step: i, parents: {} },
      { n: i + 1, messages: i + 1 },
    );
    ids.push(c.id);
  };
  const write = (saver: BaseCheckpointSaver, task: string) =>
    saver.putWrites(
      at(ids.at(-1)),
      [
        ['n', ids.length],
        ['messages', [new AIMessage(`w${task}`)]],
      ],
      task,
    );
  await put(a, 0);
  await put(b, 1);
  await write(a, 'a1'); // a has not seen checkpoint 1
  await put(a, 2);
  await write(b, 'b2'); // b has not seen checkpoint 2
  await put(b, 3);
  await put(a, 4); // a has not seen checkpoint 3 (nor moved the head past it)
  const before = [await read(a), await read(b)];
  await b.deleteThread('t');
  await put(a, 5); // a has not seen the thread go
  await write(a, 'a5');
  return before;
}

describe('two savers writing one thread in turns', () => {
  it.each(kinds.map((k) => [k.name, k] as const))('on %s, as MemorySaver', async (_, kind) => {
    if (kind.skip) return;
    const memory = new MemorySaver();
    const [expectedBefore] = await script(memory, memory);
    expect(expectedBefore).toHaveLength(5);
    const expected = await read(memory);
    expect(expected).toHaveLength(1);
    const db = await kind.open();
    try {
      const a = new CairnSaver(db.store);
      const b = new CairnSaver(await db.reopen());
      expect(await script(a, b)).toEqual([expectedBefore, expectedBefore]);
      for (const saver of [a, b, new CairnSaver(await db.reopen())])
        expect(await read(saver)).toEqual(expected);
    } finally {
      await db.dispose();
    }
  });
});
