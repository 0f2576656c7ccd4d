/**
 * Issue 29's canary audit with encryption on: 1,000 unique strings per user planted through
 * the packages (thread engine messages and state, AI SDK chats, LangGraph checkpoints via
 * CairnSaver, memories, plain store messages), then looked for in the raw SQLite file and
 * its WAL, and in a `pg_dump` of the Postgres schema; then one user is forgotten while other
 * processes keep writing for that user and for others.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createChatStore } from '@cairn/ai-sdk';
import { defineState, field, newId } from '@cairn/core';
import { CairnSaver } from '@cairn/langgraph';
import { localKeyring, type Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import { createSqliteStore } from '@cairn/store-sqlite';
import { openThread } from '@cairn/thread';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import pg from 'pg';
import type { Suite } from '../harness.js';
import { POSTGRES_URL, postgresUnreachable } from '../postgres.js';

const SECRET = 'the canary audit secret, thirty-two bytes or more';
const encryption = { keyring: localKeyring(SECRET) };
const USERS = ['ada', 'bea', 'cyd'];
const FORGOTTEN = 'ada';
const WRITERS = 4;

const Notes = defineState({ note: field<string>() });

/** Where each of a user's 1,000 canaries goes, by package. */
const PLAN = { thread: 200, chat: 200, langgraph: 100, memory: 300, store: 200 };
const ONLY_SQLITE = process.env.CANARY_ONLY_SQLITE === '1';

let serial = 0;
const canary = (user: string, where: string) =>
  `canary${where}${user}${serial++}x${newId().replaceAll('-', '').slice(-12)}`;

/** Plants 1,000 canaries of `user` through the packages; returns them. */
async function plant(store: Store, user: string): Promise<string[]> {
  const planted: string[] = [];
  const take = (where: string) => {
    const c = canary(user, where);
    planted.push(c);
    return c;
  };
  // The thread engine: a message and a state update per turn.
  const thread = await openThread(store, { schema: Notes, resourceId: user });
  for (let i = 0; i < PLAN.thread / 2; i++) {
    thread.add({ role: 'user', data: { text: take('thread') } });
    await thread.save();
    await thread.update({ note: take('state') });
  }
  await thread.close();
  // AI SDK chats.
  const chats = createChatStore({ store });
  const messages = Array.from({ length: PLAN.chat }, (_, i) => ({
    id: `${user}-ui-${i}`,
    role: i % 2 === 0 ? ('user' as const) : ('assistant' as const),
    parts: [{ type: 'text' as const, text: take('chat') }],
  }));
  await chats.saveChat({ chatId: `chat-${user}`, messages, resourceId: user });
  // LangGraph checkpoints through CairnSaver: a human message per turn, replies quoting it.
  const graph = new StateGraph(MessagesAnnotation)
    .addNode('agent', async (s) => ({
      messages: [new AIMessage(`heard ${String(s.messages.at(-1)!.content).length} chars`)],
    }))
    .addEdge(START, 'agent')
    .addEdge('agent', END)
    .compile({ checkpointer: new CairnSaver(store) });
  const config = { configurable: { thread_id: `graph-${user}` } };
  for (let i = 0; i < PLAN.langgraph; i++)
    await graph.invoke({ messages: [new HumanMessage(take('langgraph'))] }, config);
  // Memories: text and metadata.
  await store.addMemories(
    Array.from({ length: PLAN.memory / 2 }, () => ({
      agentId: 'agent',
      entityId: user,
      content: { text: take('memory') },
      metadata: { note: take('memmeta') },
    })),
  );
  // The store directly.
  const t = await store.createThread({ resourceId: user });
  let parentId: string | null = null;
  for (let i = 0; i < PLAN.store; i++) {
    const [m]: Array<{ id: string }> = await store.addMessages([
      { threadId: t.id, parentId, role: 'user', data: { text: take('store') } },
    ]);
    parentId = m!.id;
  }
  return planted;
}

/** How many of `canaries` the text holds. */
const found = (text: string, canaries: string[]) => canaries.filter((c) => text.includes(c)).length;

/** What a store's database holds at rest, as text. */
interface Raw {
  label: string;
  read(): Promise<string>;
  open(): Promise<Store>;
  /** The code a writer process runs to open a store on the database. */
  openInChild: string;
  dispose(): Promise<void>;
}

function sqliteRaw(dir: string): Raw {
  const path = join(dir, 'audit.db');
  return {
    label: 'SQLite file and WAL',
    read: async () =>
      ['', '-wal']
        .map((s) => {
          try {
            return readFileSync(path + s).toString('latin1');
          } catch {
            return '';
          }
        })
        .join('\n'),
    open: async () => createSqliteStore({ path }, { encryption }),
    openInChild: `(await import('@cairn/store-sqlite')).createSqliteStore({ path: ${JSON.stringify(path)} }, { encryption })`,
    dispose: async () => undefined,
  };
}

function postgresRaw(schema: string): Raw {
  return {
    label: 'pg_dump of the schema',
    read: async () =>
      execFileSync('pg_dump', ['--data-only', '--schema', schema, POSTGRES_URL], {
        maxBuffer: 1 << 30,
      }).toString('utf8'),
    open: () => createPostgresStore({ connectionString: POSTGRES_URL }, { schema, encryption }),
    openInChild: `await (await import('@cairn/store-postgres')).createPostgresStore({ connectionString: ${JSON.stringify(POSTGRES_URL)} }, { schema: ${JSON.stringify(schema)}, encryption, maxConnections: 2 })`,
    dispose: async () => {
      const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 1 });
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await pool.end();
    },
  };
}

/** A writer process: appends a message for `user` every turn until told to stop; reports each. */
function writer(raw: Raw, user: string): { child: ChildProcess; done: Promise<WriteLog[]> } {
  const code = `
    const { localKeyring } = await import('@cairn/store');
    const encryption = { keyring: localKeyring(${JSON.stringify(SECRET)}) };
    const store = ${raw.openInChild};
    let stop = false;
    process.on('message', () => { stop = true; });
    const log = [];
    let thread = null;
    while (!stop) {
      // A turn of the event loop per write: the parent's message to stop gets in.
      await new Promise((r) => setImmediate(r));
      const at = Date.now();
      try {
        thread ??= await store.createThread({ resourceId: ${JSON.stringify(user)} });
        await store.addMessages([{ threadId: thread.id, parentId: null, role: 'user', data: { text: 'late ' + at } }]);
        log.push([at, 'ok']);
      } catch (e) {
        log.push([at, e.code ?? 'crash']);
        if (e.code === 'NOT_FOUND') thread = null;
      }
    }
    await store.close();
    process.send(log, () => process.exit(0));
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], {
    cwd: join(dirname(fileURLToPath(import.meta.url)), '..', '..'),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const done = new Promise<WriteLog[]>((resolve, reject) => {
    child.once('message', (m) => resolve(m as WriteLog[]));
    child.once('exit', (c) => reject(new Error(`writer exited ${c} before it reported`)));
  });
  return { child, done };
}
type WriteLog = [number, string];

async function audit(raw: Raw, log: (line: string) => void): Promise<string[]> {
  const out: string[] = [];
  const store = await raw.open();
  try {
    const planted = new Map<string, string[]>();
    for (const user of USERS) {
      log(`${raw.label}: planting 1,000 canaries of ${user}`);
      planted.set(user, await plant(store, user));
    }
    const all = [...planted.values()].flat();
    const atRest = found(await raw.read(), all);
    out.push(
      `| ${raw.label}: canaries at rest, encryption on | ${all.length.toLocaleString('en')} | ${atRest} |`,
    );

    log(`${raw.label}: forgetting ${FORGOTTEN} while ${WRITERS} processes write`);
    const writers = Array.from({ length: WRITERS }, (_, i) =>
      writer(raw, i % 2 === 0 ? FORGOTTEN : USERS[1 + (i % (USERS.length - 1))]!),
    );
    await new Promise((r) => setTimeout(r, 1500));
    log(`${raw.label}: writers started`);
    const receipt = await store.forget({ resourceId: FORGOTTEN, entityId: FORGOTTEN });
    const forgottenAt = Date.now();
    log(`${raw.label}: forgotten`);
    await new Promise((r) => setTimeout(r, 1500));
    for (const w of writers) w.child.send('stop');
    const logs = await Promise.all(writers.map((w) => w.done));
    log(`${raw.label}: writers stopped`);
    const ofForgotten = logs.filter((_, i) => i % 2 === 0).flat();
    const late = ofForgotten.filter(([at]) => at > forgottenAt);
    const lateOk = late.filter(([, r]) => r === 'ok').length;
    const othersFailed = logs
      .filter((_, i) => i % 2 === 1)
      .flat()
      .filter(([, r]) => r !== 'ok').length;

    // Everything the store still gives back, as text: every thread's records, every memory.
    const texts: string[] = [];
    for (let cursor: string | null = null; ; ) {
      const page = await store.listThreads({ limit: 100, cursor });
      for (const t of page.items) texts.push(JSON.stringify(await store.exportThread(t.id)));
      if (!page.nextCursor) break;
      cursor = page.nextCursor;
    }
    for (let cursor: string | null = null; ; ) {
      const page = await store.scanMemories({ cursor, limit: 500 });
      texts.push(JSON.stringify(page.items));
      if (!page.nextCursor) break;
      cursor = page.nextCursor;
    }
    const readable = texts.join('\n');
    const mine = planted.get(FORGOTTEN)!;
    const others = USERS.filter((u) => u !== FORGOTTEN).flatMap((u) => planted.get(u)!);
    out.push(
      `| ${raw.label}: ${FORGOTTEN}'s canaries still readable through the store after forget | ${mine.length.toLocaleString('en')} | ${found(readable, mine)} |`,
      `| ${raw.label}: ${FORGOTTEN}'s canaries at rest after forget | ${mine.length.toLocaleString('en')} | ${found(await raw.read(), mine)} |`,
      `| ${raw.label}: other users' canaries still readable | ${others.length.toLocaleString('en')} | ${found(readable, others)} |`,
      `| ${raw.label}: writes for ${FORGOTTEN} started after forget returned, succeeded | ${late.length.toLocaleString('en')} | ${lateOk} |`,
      `| ${raw.label}: writes for other users that failed meanwhile | ${logs
        .filter((_, i) => i % 2 === 1)
        .flat()
        .length.toLocaleString('en')} | ${othersFailed} |`,
    );
    log(`${raw.label}: receipt ${JSON.stringify(receipt.counts)}`);
  } finally {
    await store.close();
  }
  return out;
}

const suite: Suite = {
  id: 'canary-audit',
  title: 'Encryption at rest and forget: the canary audit (issue 29)',
  async run(log) {
    const rows: string[] = [];
    const notes: string[] = [];
    const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-canary-'));
    try {
      rows.push(...(await audit(sqliteRaw(dir), log)));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const unreachable = ONLY_SQLITE
      ? 'left out by CANARY_ONLY_SQLITE'
      : await postgresUnreachable();
    if (unreachable) notes.push(`Postgres rows left out: ${unreachable}`);
    else {
      const raw = postgresRaw(`cairn_bench_canary_${newId().replaceAll('-', '').slice(-10)}`);
      try {
        rows.push(...(await audit(raw, log)));
      } finally {
        await raw.dispose();
      }
    }
    return {
      markdown: `| measure | of | found |
| --- | ---: | ---: |
${rows.join('\n')}

Each of ${USERS.length} users gets 1,000 unique canaries, planted on a store with
\`encryption: { keyring }\`: ${PLAN.thread / 2} turns of \`@cairn/thread\` (a message and a
state update each), a ${PLAN.chat}-message \`@cairn/ai-sdk\` chat, ${PLAN.langgraph} LangGraph
turns through \`CairnSaver\`, ${PLAN.memory / 2} memories (text and metadata) of the user's
entity, and ${PLAN.store} messages added to the store directly. "At rest" searches the raw
SQLite file and its WAL, and \`pg_dump --data-only\` of the Postgres schema. Then
\`forget({ resourceId, entityId })\` of ${FORGOTTEN} runs while ${WRITERS} processes append
messages (two for ${FORGOTTEN}, two for the others); "readable" searches every thread's
\`exportThread\` and every memory the store still gives back.
${notes.map((n) => `\n${n}`).join('')}`,
    };
  },
};

export default suite;
