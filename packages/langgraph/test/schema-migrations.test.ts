// CairnSaver with a versioned schema: a graph interrupted under v1 code (channels `name`, a
// string, and `score`, a number) is read and resumed under v2 code, which renamed `name` to
// `title` and turned `score` into `{ value }`; v1 code then refuses the thread. Real
// LangGraph graphs on SQLite and Postgres (and the in-memory store).
import { isCairnError } from '@cairn/core';
import type { Store } from '@cairn/store';
import { AIMessage, type BaseMessage, HumanMessage } from '@langchain/core/messages';
import {
  Annotation,
  Command,
  END,
  interrupt,
  MemorySaver,
  messagesStateReducer,
  START,
  StateGraph,
} from '@langchain/langgraph';
import { afterAll, describe, expect, it } from 'vitest';
import { checkSaverSchema, migrateCheckpoint } from '../src/channel-migrations.js';
import { CairnSaver, type ChannelMigration } from '../src/index.js';
import { closePglite, removeTempDirs, storeKinds } from './stores.js';

afterAll(async () => {
  removeTempDirs();
  await closePglite();
});

const V1 = Annotation.Root({
  messages: Annotation<BaseMessage[]>({ reducer: messagesStateReducer, default: () => [] }),
  name: Annotation<string>(),
  score: Annotation<number>(),
});
const V2 = Annotation.Root({
  messages: Annotation<BaseMessage[]>({ reducer: messagesStateReducer, default: () => [] }),
  title: Annotation<string>(),
  score: Annotation<{ value: number }>(),
});

/** Node runs by name, to see that a resume re-runs nothing. */
type Runs = Record<string, number>;
const ran = (runs: Runs, node: string) => {
  runs[node] = (runs[node] ?? 0) + 1;
};

/** v1: `ask` names the topic and scores it, `review` waits for a human, then answers. */
function graphV1(saver: CairnSaver | MemorySaver, runs: Runs) {
  return new StateGraph(V1)
    .addNode('ask', () => {
      ran(runs, 'ask');
      return { name: 'stones', score: 3, messages: [new AIMessage('which topic?')] };
    })
    .addNode('review', (s) => {
      ran(runs, 'review');
      const answer = interrupt({ question: `approve ${s.name}?` });
      return { messages: [new AIMessage(`${answer}: ${s.name} at ${s.score}`)] };
    })
    .addEdge(START, 'ask')
    .addEdge('ask', 'review')
    .addEdge('review', END)
    .compile({ checkpointer: saver });
}

/** v2: the same graph over the renamed channel and the changed type. */
function graphV2(saver: CairnSaver | MemorySaver, runs: Runs) {
  return new StateGraph(V2)
    .addNode('ask', () => {
      ran(runs, 'ask');
      return { title: 'stones', score: { value: 3 }, messages: [new AIMessage('which topic?')] };
    })
    .addNode('review', (s) => {
      ran(runs, 'review');
      const answer = interrupt({ question: `approve ${s.title}?` });
      return { messages: [new AIMessage(`${answer}: ${s.title} at ${s.score.value}`)] };
    })
    .addEdge(START, 'ask')
    .addEdge('ask', 'review')
    .addEdge('review', END)
    .compile({ checkpointer: saver });
}

/** The v1 → v2 step; `calls` counts the checkpoints it migrated. */
function toV2(calls = { n: 0 }): ChannelMigration {
  return {
    from: 1,
    to: 2,
    rename: { name: 'title' },
    migrate(values) {
      calls.n++;
      // A checkpoint before `ask` ran has no score yet.
      return values.score === undefined ? values : { ...values, score: { value: values.score } };
    },
  };
}
const v2 = (calls?: { n: number }) => ({ schema: { version: 2, migrations: [toV2(calls)] } });

const config = (id: string) => ({ configurable: { thread_id: id } });
const texts = (messages: BaseMessage[]) => messages.map((m) => String(m.content));

describe.each(await storeKinds())('CairnSaver schema versions on $name', (kind) => {
  it.skipIf(kind.skip)(
    'reads a v1 checkpoint as v2, resumes it under v2 code, and v1 code then refuses the thread',
    async () => {
      const { store, reopen, dispose } = await kind.open();
      try {
        const id = `thread-${kind.name.length}`;
        const runs1: Runs = {};
        await graphV1(new CairnSaver(store), runs1).invoke(
          { messages: [new HumanMessage('hi')] },
          config(id),
        );
        expect(runs1).toEqual({ ask: 1, review: 1 });
        const asWritten = (await new CairnSaver(store).getTuple(config(id)))!.checkpoint;

        // Another process, running v2 code.
        const calls = { n: 0 };
        const saver2 = new CairnSaver(await reopen(), v2(calls));
        const tuple = (await saver2.getTuple(config(id)))!;
        const values = tuple.checkpoint.channel_values as Record<string, unknown>;
        expect(values.title).toBe('stones');
        expect(values.score).toEqual({ value: 3 });
        expect('name' in values).toBe(false);
        // The renamed channel keeps the version `name` had, and what each node saw of it.
        const { channel_versions: versions, versions_seen: seen } = tuple.checkpoint;
        expect(versions.title).toBe(asWritten.channel_versions.name);
        expect(versions.score).toBe(asWritten.channel_versions.score);
        expect('name' in versions).toBe(false);
        expect(Object.keys(seen)).toEqual(Object.keys(asWritten.versions_seen));
        for (const node of Object.values(seen)) expect('name' in node).toBe(false);
        for await (const t of saver2.list(config(id))) {
          const v = t.checkpoint.channel_values as Record<string, unknown>;
          expect('name' in v).toBe(false);
          if (v.score !== undefined) expect(v.score).toEqual({ value: 3 });
        }

        const runs2: Runs = {};
        const graph2 = graphV2(saver2, runs2);
        expect((await graph2.getState(config(id))).next).toEqual(['review']);
        const done = await graph2.invoke(new Command({ resume: 'approved' }), config(id));
        // Only the interrupted node ran again; `ask` did not.
        expect(runs2).toEqual({ review: 1 });
        expect(texts(done.messages)).toEqual(['hi', 'which topic?', 'approved: stones at 3']);
        expect(done.title).toBe('stones');

        // The checkpoints v2 wrote hold every channel in the v2 shape: a fresh v2 saver reads
        // the newest without migrating anything.
        const before = calls.n;
        const fresh = new CairnSaver(await reopen(), v2(calls));
        const last = (await fresh.getTuple(config(id)))!.checkpoint.channel_values as Record<
          string,
          unknown
        >;
        expect(calls.n).toBe(before);
        expect(last.title).toBe('stones');
        expect(last.score).toEqual({ value: 3 });
        const again: Runs = {};
        const more = await graphV2(fresh, again).invoke(
          { messages: [new HumanMessage('once more')] },
          config(id),
        );
        expect(again).toEqual({ ask: 1, review: 1 });
        expect(more.score).toEqual({ value: 3 });

        // v1 code refuses to read or write the thread v2 wrote.
        const saver1 = new CairnSaver(await reopen());
        const count = async () => {
          let n = 0;
          for await (const _ of fresh.list(config(id))) n++;
          return n;
        };
        const stored = await count();
        const refused = await saver1.getTuple(config(id)).catch((e: unknown) => e);
        expect(isCairnError(refused, 'SCHEMA_TOO_NEW')).toBe(true);
        expect((refused as { details: unknown }).details).toEqual({ found: 2, supported: 1 });
        const write = await graphV1(saver1, {})
          .invoke({ messages: [new HumanMessage('from old code')] }, config(id))
          .catch((e: unknown) => e);
        expect(isCairnError(write, 'SCHEMA_TOO_NEW')).toBe(true);
        const latest = (await fresh.getTuple(config(id)))!;
        const put = await saver1
          .put(
            { configurable: { thread_id: id, checkpoint_ns: '', checkpoint_id: undefined } },
            { ...latest.checkpoint, id: '1f0ffff0-0000-6000-8000-000000000000' },
            { source: 'update', step: 99, parents: {} },
            {},
          )
          .catch((e: unknown) => e);
        expect(isCairnError(put, 'SCHEMA_TOO_NEW')).toBe(true);
        expect(await count()).toBe(stored);
      } finally {
        await dispose();
      }
    },
    60_000,
  );

  it.skipIf(kind.skip)(
    'resumes a v1 thread under v2 as MemorySaver resumes the same thread written by v2 code',
    async () => {
      const { store, reopen, dispose } = await kind.open();
      try {
        const id = 'compared';
        await graphV1(new CairnSaver(store), {}).invoke(
          { messages: [new HumanMessage('hi')] },
          config(id),
        );
        const migrated = graphV2(new CairnSaver(await reopen(), v2()), {});
        const reference = graphV2(new MemorySaver(), {});
        await reference.invoke({ messages: [new HumanMessage('hi')] }, config(id));
        for (const g of [migrated, reference]) {
          const s = await g.getState(config(id));
          expect(s.next).toEqual(['review']);
        }
        const [a, b] = await Promise.all(
          [migrated, reference].map((g) => g.invoke(new Command({ resume: 'ok' }), config(id))),
        );
        expect({ ...a, messages: texts(a!.messages) }).toEqual({
          ...b,
          messages: texts(b!.messages),
        });
      } finally {
        await dispose();
      }
    },
    60_000,
  );
});

describe('CairnSaver schema option', () => {
  it('refuses a bad schema with INVALID_ARGUMENT, as defineState does', async () => {
    const kinds = await storeKinds();
    const { store, dispose } = await kinds[0]!.open();
    const bad: unknown[] = [
      { version: 0 },
      { version: 2, migrations: [{ from: 2, to: 3, migrate: (v: object) => v }] },
      { version: 2, migrations: [{ from: 1, to: 2 }] },
      { version: 2, migrations: [{ from: 1, to: 2, migrate: (v: object) => v, rename: { a: 7 } }] },
      {
        version: 2,
        migrations: [{ from: 1, to: 2, migrate: (v: object) => v, rename: { __start__: 'x' } }],
      },
      { version: 2, migrations: [{ from: 1, to: 2, migrate: (v: object) => v, schema: null }] },
      { version: 1, every: 1 },
    ];
    for (const schema of bad) {
      let e: unknown;
      try {
        new CairnSaver(store as Store, { schema } as never);
      } catch (x) {
        e = x;
      }
      expect(isCairnError(e, 'INVALID_ARGUMENT'), JSON.stringify(schema)).toBe(true);
    }
    expect(() => new CairnSaver(store, v2())).not.toThrow();
    await dispose();
  });
});

describe('migrateCheckpoint', () => {
  it('moves versions and what nodes saw with a rename; drops a dropped channel; an added one is seen by all', () => {
    const schema = checkSaverSchema({
      version: 2,
      migrations: [
        {
          from: 1,
          to: 2,
          rename: { name: 'title' },
          migrate: ({ legacy: _, ...rest }: Record<string, unknown>) => ({ ...rest, tags: [] }),
        },
      ],
    });
    const checkpoint = {
      v: 4,
      id: 'c',
      ts: '',
      channel_values: { name: 'stones', legacy: 1, 'branch:to:review': null },
      channel_versions: { name: 3, legacy: 2, 'branch:to:review': 5 },
      versions_seen: { review: { name: 3, 'branch:to:review': 4 } },
    };
    const pending: [string, string, unknown][] = [['task', 'name', 'rocks']];
    migrateCheckpoint(schema, checkpoint, pending, 1, () => 1);
    expect(checkpoint.channel_values).toEqual({
      title: 'stones',
      tags: [],
      'branch:to:review': null,
    });
    expect(checkpoint.channel_versions).toEqual({ title: 3, tags: 5, 'branch:to:review': 5 });
    expect(checkpoint.versions_seen).toEqual({
      review: { title: 3, tags: 5, 'branch:to:review': 4 },
    });
    expect(pending).toEqual([['task', 'title', 'rocks']]);
    expect(() => migrateCheckpoint(schema, checkpoint, [], 3, () => 1)).toThrow(
      expect.objectContaining({ code: 'SCHEMA_TOO_NEW' }),
    );
  });
});
