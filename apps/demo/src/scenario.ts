import { type Composer, createComposer } from '@cairn/compose';
import { type Checkpoint, isCairnError, type Message, type Viewer } from '@cairn/core';
import {
  type AgentMemory,
  createMemory,
  type Embedder,
  memoriesProvider,
  type RecallHit,
} from '@cairn/memory';
import type { Store } from '@cairn/store';
import {
  type CairnThread,
  openThread,
  recentMessagesProvider,
  type ThreadRun,
  threadStateProvider,
} from '@cairn/thread';
import type { ChatClient } from './chat-client.js';
import {
  type CorpusDocument,
  keywordSearcher,
  loadCorpus,
  type Searcher,
  type SearchHit,
} from './corpus.js';
import { demoHashingEmbedder } from './demo-embedder.js';
import {
  composeReply,
  extractFindings,
  type Finding,
  formHypothesis,
  mergeHits,
  planTasks,
  type Reflection,
  recordDiscoveries,
  reflect,
  titleFor,
} from './research-agent.js';
import { Research } from './research-state.js';
import { drawBranchTree, formatSteps, type Terminal } from './terminal.js';
import { clip } from './text.js';

/** The agent that owns every memory the demo writes. */
export const AGENT_ID = 'research-assistant';
/** The world the shared corpus lives in: every conversation of the demo can recall it. */
export const WORLD_ID = 'cairn-demo';
export const CHECKPOINT = 'after-iteration-1';

/** The demo's memory; by default on the hashing embedder (local, deterministic, no network). */
export function createDemoMemory(
  store: Store,
  embedder: Embedder = demoHashingEmbedder(),
): AgentMemory {
  return createMemory({ store, embedder, agentId: AGENT_ID });
}

/** Who recalls in a conversation: the agent, in that conversation's room, in the demo's world. */
export function viewerFor(threadId: string): Viewer {
  return { agentId: AGENT_ID, roomId: threadId, worldId: WORLD_ID };
}

const ALICE_NOTES = {
  name: 'field-notes-plot7.md',
  text:
    'Field notes, plot 7 (Alice): hairy vetch terminated at early flowering; soil nitrate at 30 cm stayed ' +
    'below 10 mg/kg until maize reached V6, while the cereal rye strip next to it showed pale maize and ' +
    'lower nitrate. Nodules on the vetch were pink inside in April.',
};
const BOB_QUESTION = 'Which legumes fix the most nitrogen, and does soil nitrate reduce fixation?';

export interface ScenarioOptions {
  store: Store;
  question: string;
  term: Terminal;
  /** An OpenAI-compatible chat endpoint for the reply; null keeps the demo fully local. */
  chat?: ChatClient | null;
  corpus?: CorpusDocument[];
  /** The memory's embedder (default: the hashing embedder). */
  embedder?: Embedder;
}

export interface ScenarioResult {
  aliceThreadId: string;
  bobThreadId: string;
  branches: string[];
  messages: number;
  elapsedMs: number;
}

/**
 * The whole demo: ingests the corpus, runs Alice's research (two iterations on `main`,
 * a checkpoint after the first, then a restore to explore another objective on
 * `main-v2`), runs Bob's question in his own conversation, shows that Alice's uploaded
 * notes stay in her room, and draws the branch tree. If anything fails, the threads it
 * created are deleted again, so no half-written thread is left behind.
 *
 * @example
 * ```ts
 * const store = createSqliteStore({ path: '.cairn/cairn.db' });
 * await runScenario({ store, question: 'How do cover crops feed soil microbes?', term: new Terminal() });
 * ```
 */
export async function runScenario(options: ScenarioOptions): Promise<ScenarioResult> {
  const started = Date.now();
  const { store, term } = options;
  const corpus = options.corpus ?? loadCorpus();
  const memory = createDemoMemory(store, options.embedder);
  const created: string[] = [];
  try {
    await ingestCorpus(memory, store, term, corpus);

    const alice = await ResearchSession.open({
      ...options,
      corpus,
      memory,
      user: 'alice',
      question: options.question,
      created,
    });
    term.heading(`Alice's conversation · thread ${alice.thread.id}`);
    const run = await alice.startRun();
    try {
      await alice.upload(ALICE_NOTES.name, ALICE_NOTES.text);
      const first = await alice.iterate(options.question, 1);
      const checkpoint = await alice.thread.checkpoint(CHECKPOINT);
      term.line(
        `  ${term.magenta('◆')} checkpoint ${term.bold(CHECKPOINT)} saved at message ${checkpoint.messageId.slice(-8)}`,
      );
      await alice.heartbeat(run);

      await alice.iterate(first.nextObjective, 2);
      await alice.heartbeat(run);
      await alice.explore(checkpoint, first);
      await run.release({ result: 'completed' });
      const record = await alice.thread.runStatus();
      term.line(
        `  ${term.cyan('run')}   released: ${record?.lastResult ?? '?'} after ${((record?.endedAt ?? Date.now()) - (record?.startedAt ?? started)) / 1000} s ` +
          term.dim(
            `(owner ${record?.owner}, last heartbeat ${record ? new Date(record.lastHeartbeatAt).toISOString().slice(11, 19) : '?'})`,
          ),
      );
    } catch (error) {
      await run
        .release({ result: 'failed', error: (error as Error).message })
        .catch(() => undefined);
      throw error;
    } finally {
      alice.stopHeartbeats();
    }

    const bob = await ResearchSession.open({
      ...options,
      corpus,
      memory,
      user: 'bob',
      question: BOB_QUESTION,
      created,
    });
    term.heading(`Bob's conversation · thread ${bob.thread.id}`);
    const bobRun = await bob.startRun();
    try {
      await bob.iterate(BOB_QUESTION, 1);
      await bobRun.release({ result: 'completed' });
    } finally {
      bob.stopHeartbeats();
    }

    await showScopes(term, memory, alice.thread.id, bob.thread.id);

    term.heading('Branch tree');
    await alice.thread.switchBranch('main');
    const branches = await alice.thread.branches();
    const chains = new Map<string, Message[]>();
    for (const b of branches)
      chains.set(b.id, b.headMessageId ? await store.getChain(b.headMessageId) : []);
    for (const l of drawBranchTree(term, branches, chains, await alice.thread.checkpoints()))
      term.line(l);
    const messageIds = new Set([...chains.values()].flat().map((m) => m.id));

    term.heading('Summary');
    const stats = alice.composer.stats;
    const bobStats = bob.composer.stats;
    const fragments = await store.countMemories({ types: ['fragment'], worldId: WORLD_ID });
    term.line(
      `  threads      2 (alice: ${branches.length} branches, ${messageIds.size} messages; bob: 1 branch)`,
    );
    term.line(
      `  memory       ${corpus.length} documents, ${fragments} fragments shared in world "${WORLD_ID}"; memory version ${memory.version}`,
    );
    term.line(
      `  compose      cache hits ${stats.hits + bobStats.hits}, misses ${stats.misses + bobStats.misses}, entries ${stats.size + bobStats.size}`,
    );
    const heard = [...alice.events.entries()].map(([kind, n]) => `${n} ${kind}`).join(', ');
    term.line(`  events       Alice's thread.subscribe heard ${heard}`);
    const elapsedMs = Date.now() - started;
    term.line(`  total        ${(elapsedMs / 1000).toFixed(1)} s`);
    await alice.close();
    await bob.close();
    return {
      aliceThreadId: alice.thread.id,
      bobThreadId: bob.thread.id,
      branches: branches.map((b) => b.name),
      messages: messageIds.size,
      elapsedMs,
    };
  } catch (error) {
    // Never leave a half-written conversation behind.
    for (const id of created) {
      await store.deleteThread(id).catch(() => undefined);
      // ...nor the notes and discoveries remembered in its room.
      const own = await store.listMemories({ roomId: id }, { limit: 10_000 }).catch(() => []);
      if (own.length > 0) await store.deleteMemories(own.map((m) => m.id)).catch(() => undefined);
    }
    throw error;
  }
}

/** Ingests the corpus as documents and fragments (skipping what is stored), with a progress bar. */
export async function ingestCorpus(
  memory: AgentMemory,
  store: Store,
  term: Terminal,
  corpus: readonly CorpusDocument[],
): Promise<void> {
  term.heading('Memory: the research corpus');
  const stored = await store.countMemories({ types: ['document'], worldId: WORLD_ID });
  if (stored >= corpus.length) {
    const fragments = await store.countMemories({ types: ['fragment'], worldId: WORLD_ID });
    term.line(
      `  already ingested: ${stored} documents, ${fragments} fragments ${term.dim('(--fresh starts over)')}`,
    );
    return;
  }
  const started = Date.now();
  let fragments = 0;
  for (const [i, doc] of corpus.entries()) {
    const result = await memory.ingestDocument(
      {
        text: doc.text,
        title: doc.title,
        scope: 'shared',
        worldId: WORLD_ID,
        metadata: { corpusId: doc.id, topic: doc.topic },
      },
      {
        chunkSize: 480,
        overlap: 60,
        onProgress: (p) =>
          term.progress(
            'ingesting',
            i + p.done / Math.max(1, p.total),
            corpus.length,
            `${doc.id} (${p.phase})`,
          ),
      },
    );
    fragments += result.fragments.length;
    term.progress('ingesting', i + 1, corpus.length, doc.id);
  }
  term.line(
    `  ${corpus.length} documents → ${fragments} fragments, embedded with the hashing embedder and stored in ${Date.now() - started} ms`,
  );
}

interface SessionOptions extends ScenarioOptions {
  corpus: CorpusDocument[];
  memory: AgentMemory;
  user: string;
  /** Gets the new thread's id first thing, so a failure later can delete it. */
  created: string[];
}

interface LiteratureResult {
  taskId: string;
  facet: string;
  findings: Finding[];
  hits: SearchHit[];
}

/** One user's research conversation: the thread, its composer, and the agent loop. */
class ResearchSession {
  readonly thread: CairnThread<typeof Research>;
  readonly composer: Composer;
  readonly #memory: AgentMemory;
  readonly #store: Store;
  readonly #term: Terminal;
  readonly #user: string;
  readonly #question: string;
  readonly #docs: Map<string, CorpusDocument>;
  readonly #keyword: Searcher;
  readonly #chat: ChatClient | null;
  #timer: NodeJS.Timeout | undefined;
  #explored: string[] = [];
  /** Events heard from the engine's `subscribe`, by kind. */
  readonly events = new Map<string, number>();

  private constructor(options: SessionOptions, thread: CairnThread<typeof Research>) {
    this.thread = thread;
    this.#memory = options.memory;
    this.#store = options.store;
    this.#term = options.term;
    this.#user = options.user;
    this.#question = options.question;
    this.#docs = new Map(options.corpus.map((d) => [d.id, d]));
    this.#keyword = keywordSearcher(options.corpus);
    this.#chat = options.chat ?? null;
    thread.subscribe((event) => {
      this.events.set(event.kind, (this.events.get(event.kind) ?? 0) + 1);
    });
    const viewer = viewerFor(thread.id);
    this.composer = createComposer({
      providers: [
        { ...recentMessagesProvider(thread, { limit: 6 }), position: 10 },
        {
          ...threadStateProvider(thread, {
            fields: ['currentObjective', 'hypothesis', 'keyInsights'],
          }),
          position: 20,
        },
        memoriesProvider(options.memory, {
          limit: 4,
          position: 30,
          viewerFrom: () => viewer,
          queryFrom: () => thread.state.currentObjective ?? options.question,
          heading: 'Relevant memories',
        }),
      ],
      cache: { max: 200 },
      timeoutMs: 3000,
    });
  }

  static async open(options: SessionOptions): Promise<ResearchSession> {
    const thread = await openThread(options.store, {
      schema: Research,
      resourceId: options.user,
      title: titleFor(options.question),
    });
    options.created.push(thread.id);
    await thread.update({ objective: options.question, title: titleFor(options.question) });
    return new ResearchSession(options, thread);
  }

  get viewer(): Viewer {
    return viewerFor(this.thread.id);
  }

  /** Takes the thread's research run, renews it every 2 s, and shows that a second worker is refused. */
  async startRun(): Promise<ThreadRun> {
    const term = this.#term;
    const run = await this.thread.acquireRun({
      owner: `cairn-demo:${process.pid}:${this.#user}`,
      ttlMs: 15_000,
    });
    term.line(`  ${term.cyan('run')}   acquired by ${run.owner} for 15 s, renewed by heartbeats`);
    try {
      await this.thread.acquireRun({ owner: 'another-worker', ttlMs: 15_000 });
      throw new Error('a second worker took a run that is live');
    } catch (error) {
      if (!isCairnError(error, 'CONFLICT')) throw error;
      term.line(
        `  ${term.cyan('run')}   a second worker asking for the same run gets ${term.yellow('CONFLICT')}: ${term.dim(clip(error.message, 90))}`,
      );
    }
    this.#timer = setInterval(() => {
      run.heartbeat().catch(() => undefined);
    }, 2000);
    this.#timer.unref();
    return run;
  }

  async heartbeat(run: ThreadRun): Promise<void> {
    const record = await run.heartbeat();
    this.#term.line(
      `  ${this.#term.cyan('run')}   heartbeat: live until ${new Date(record.expiresAt).toISOString().slice(11, 19)} UTC`,
    );
  }

  stopHeartbeats(): void {
    clearInterval(this.#timer);
  }

  /** The user uploads notes: the text goes to memory in this conversation's room only. */
  async upload(name: string, text: string): Promise<void> {
    const term = this.#term;
    const note = await this.#memory.remember({
      text,
      type: 'custom',
      scope: 'room',
      roomId: this.thread.id,
      worldId: WORLD_ID,
      entityId: this.#user,
      metadata: { upload: name, uploadedBy: this.#user },
    });
    this.thread.add({
      role: 'user',
      type: 'upload',
      data: { text: `Uploaded ${name} (${text.length} characters)`, name, memoryId: note.id },
    });
    await this.thread.save();
    await this.thread.update({
      uploadedDatasets: [
        { name, memoryId: note.id, uploadedBy: this.#user, characters: text.length },
      ],
    });
    term.line(
      `  ${term.yellow(`${this.#user} ›`)} uploads ${term.bold(name)} → memory ${note.id.slice(-8)} (scope room: only this conversation)`,
    );
  }

  /** One research iteration: plan, parallel literature tasks, hypothesis, reflection, discoveries, compose, reply. */
  async iterate(
    objective: string,
    iteration: number,
    label = this.thread.branchName,
  ): Promise<Reflection> {
    const term = this.#term;
    const thread = this.thread;
    term.line();
    term.line(term.bold(`  ▌ Iteration ${iteration} on ${label}`));
    const text =
      iteration === 1 && objective === this.#question ? objective : `Follow-up: ${objective}`;
    thread.add({ role: 'user', type: 'question', data: { text } });
    const [asked] = await thread.save();
    term.line(`  ${term.yellow(`${this.#user} ›`)} ${text}`);
    const turn = await thread.beginTurn({
      messageId: asked!.id,
      source: 'cli',
      userId: this.#user,
    });
    try {
      const tasks = await turn.step('plan', async () => {
        const planned = planTasks(objective, iteration);
        // Each step saves its message first, so its state changes show "as of" that message.
        thread.add({
          role: 'assistant',
          type: 'plan',
          data: {
            text: `Plan: ${planned.length} literature tasks (${planned.map((t) => t.facet).join(', ')})`,
            tasks: planned.map((t) => t.id),
          },
        });
        await thread.save();
        await thread.update({
          currentObjective: objective,
          iteration,
          plan: planned.map(({ id, facet, query }) => ({ id, facet, query })),
        });
        return planned;
      });
      term.line(
        `  ${term.green('plan')}  ${tasks.length} literature tasks in parallel: ${tasks.map((t) => t.facet).join(' · ')}`,
      );

      const passages = await this.#store.countMemories({
        viewer: this.viewer,
        types: ['fragment', 'custom'],
      });
      let finished = 0;
      const results = await turn.step('literature', () =>
        Promise.all(
          tasks.map(async (task): Promise<LiteratureResult> => {
            const recalled = await this.#memory.recall(task.query, {
              viewer: this.viewer,
              mode: 'hybrid',
              limit: 8,
              types: ['fragment', 'custom'],
            });
            const hits = mergeHits(
              [recalled.map((h) => this.#toSearchHit(h)), await this.#keyword(task.query, 4)],
              this.#docs,
              6,
            );
            const findings = extractFindings(task, hits);
            // Four tasks write the same state at once; the engine applies them one at a time.
            await thread.update({
              tasks: {
                [task.id]: {
                  facet: task.facet,
                  iteration,
                  passages: hits.length,
                  findings: findings.length,
                  documents: [...new Set(findings.map((f) => f.docId))],
                },
              },
              sourcesConsulted: hits.map((h) => h.docId),
            });
            finished++;
            term.progress('literature', finished, tasks.length, task.facet);
            return { taskId: task.id, facet: task.facet, findings, hits };
          }),
        ),
      );
      const recorded = tasks.filter((t) => thread.state.tasks[t.id] !== undefined).length;
      for (const r of results) {
        const via = summarizeVia(r.hits);
        term.line(
          `  ${term.dim('task')}  ${r.taskId.padEnd(16)} ${String(r.hits.length).padStart(2)} passages read, ${r.findings.length} sentences kept ${term.dim(via)}`,
        );
      }
      term.line(
        `  ${term.dim('state')} ${recorded}/${tasks.length} parallel task results in state.tasks (serialized writes, none lost) · state v${thread.stateVersion}`,
      );
      const findings = results.flatMap((r) => r.findings);
      await turn.update({
        turnFindings: findings.map(({ taskId, docId, title, quote }) => ({
          taskId,
          docId,
          title,
          quote,
        })),
      });
      thread.add(
        results.map((r) => ({
          role: 'tool',
          type: 'literature',
          data: {
            text: `${r.facet}: ${r.findings.length} passages kept from ${r.hits.length} read`,
            taskId: r.taskId,
            findings: r.findings.map(({ docId, quote }) => ({ docId, quote })),
          },
        })),
      );
      await thread.save();

      const hypothesis = await turn.step('hypothesis', async () => {
        const h = formHypothesis(objective, findings);
        thread.add({ role: 'assistant', type: 'hypothesis', data: { text: `Hypothesis: ${h}` } });
        await thread.save();
        await thread.update({ hypothesis: h });
        return h;
      });
      term.line(`  ${term.green('hypothesis')} ${clip(hypothesis, 160)}`);

      const reflection = await turn.step('reflect', async () => {
        const r = reflect({
          question: this.#question,
          objective,
          tasks,
          findings,
          explored: this.#explored,
          passagesSearched: passages,
        });
        const before = thread.state.keyInsights.length;
        thread.add({
          role: 'assistant',
          type: 'reflection',
          data: {
            text: `Reflection: ${r.keyInsights.length} key insights; next objective: ${r.nextObjective}`,
            keyInsights: r.keyInsights,
            methodology: r.methodology,
          },
        });
        await thread.save();
        await thread.update({
          keyInsights: r.keyInsights,
          methodology: r.methodology,
          nextObjective: r.nextObjective,
          title: r.title,
        });
        if (iteration === 1) await this.#store.updateThread(thread.id, { title: r.title });
        term.line(
          `  ${term.green('reflect')} +${thread.state.keyInsights.length - before} new key insights (appendUnique: ${thread.state.keyInsights.length} in all) · title "${r.title}"`,
        );
        term.line(`          ${term.dim(`methodology: ${clip(r.methodology, 140)}`)}`);
        term.line(`          next objective: ${term.bold(r.nextObjective)}`);
        return r;
      });
      this.#explored.push(objective);

      const discoveries = await turn.step('discoveries', async () => {
        const found = recordDiscoveries({
          objective,
          iteration,
          insights: reflection.keyInsights,
          findings,
        });
        await thread.update({ discoveries: Object.fromEntries(found.map((d) => [d.id, d])) });
        return found;
      });
      for (const d of discoveries) {
        term.line(
          `  ${term.green('discovery')} ${d.id} ${clip(d.claim, 90)} ${term.dim(`← ${d.evidence.map((e) => e.docId).join(', ')}`)}`,
        );
      }

      const composed = await turn.step('compose', () =>
        this.composer.compose(asked!, { version: `${thread.version}|${this.#memory.version}` }),
      );
      const names = Object.keys(composed.data.providers);
      term.line(
        `  ${term.green('compose')} ${names.join(' + ')} → ${composed.text.length} characters of context` +
          term.dim(
            ` (cache: ${this.composer.stats.hits} hits, ${this.composer.stats.misses} misses)`,
          ),
      );

      const hitsBefore = this.composer.stats.hits;
      const reply = await turn.step('reply', async () => {
        // The reply reads the same context: same message, same versions, so the cache serves it.
        const context = await this.composer.compose(asked!, {
          version: `${thread.version}|${this.#memory.version}`,
        });
        let body = composeReply({ objective, hypothesis, reflection, discoveries });
        if (this.#chat) {
          try {
            body = await this.#chat.complete([
              {
                role: 'system',
                content:
                  'You are a careful research assistant. Answer from the context only and cite document ids in brackets.',
              },
              {
                role: 'user',
                content: `${context.text}\n\nDraft answer:\n${body}\n\nQuestion: ${objective}`,
              },
            ]);
          } catch (error) {
            term.line(
              `  ${term.yellow('chat')} ${(error as Error).message}; using the local reply`,
            );
          }
        }
        thread.add({ role: 'assistant', type: 'reply', data: { text: body } });
        await thread.save();
        return body;
      });
      const served =
        this.composer.stats.hits > hitsBefore
          ? 'served from the cache'
          : 'composed again (cache miss)';
      term.line(
        `  ${term.green('compose')} reply context ${served} ${term.dim(`(cache: ${this.composer.stats.hits} hits, ${this.composer.stats.misses} misses)`)}`,
      );
      term.line(`  ${term.cyan('assistant ›')}`);
      for (const l of reply.split('\n')) term.line(`    ${clip(l, 150)}`);

      // Discoveries become memories of this conversation's room.
      await this.#memory.rememberMany(
        discoveries.map((d) => ({
          text: d.claim,
          type: 'description' as const,
          scope: 'room' as const,
          roomId: thread.id,
          worldId: WORLD_ID,
          metadata: { discoveryId: d.id, evidence: d.evidence.map((e) => e.docId) },
        })),
      );
      const done = await turn.finish();
      term.line(`  ${term.dim('timings')} ${formatSteps(done.steps)}`);
      return reflection;
    } catch (error) {
      if (turn.status === 'running')
        await turn.finish({ error: (error as Error).message }).catch(() => undefined);
      throw error;
    }
  }

  /** Restores the checkpoint on a new branch and explores the alternative objective there. */
  async explore(checkpoint: Checkpoint, first: Reflection): Promise<void> {
    const term = this.#term;
    const mainInsights = this.thread.state.keyInsights.length;
    const mainIteration = this.thread.state.iteration;
    const branch = await this.thread.restore(checkpoint.name);
    const atCheckpoint = await this.thread.stateAt(checkpoint.messageId);
    term.line();
    term.line(
      `  ${term.magenta('◆')} restore ${term.bold(checkpoint.name)} → new branch ${term.bold(branch.name)} (active); ` +
        `state rewound to iteration ${this.thread.state.iteration} with ${this.thread.state.keyInsights.length} insights (main: iteration ${mainIteration}, ${mainInsights})`,
    );
    term.line(
      `          stateAt(checkpoint) agrees: objective "${clip(atCheckpoint.currentObjective ?? '', 60)}", ${atCheckpoint.keyInsights.length} insights`,
    );
    this.#explored = [this.#question];
    const alternative = first.alternatives[0] ?? `What limits ${first.title.toLowerCase()}?`;
    await this.iterate(alternative, 2, `${branch.name} (alternative objective)`);
  }

  #toSearchHit(hit: RecallHit): SearchHit {
    const meta = hit.memory.metadata;
    const docId =
      typeof meta.corpusId === 'string'
        ? meta.corpusId
        : `upload:${String(meta.upload ?? hit.memory.id)}`;
    const title = typeof meta.title === 'string' ? meta.title : String(meta.upload ?? 'note');
    return { docId, title, text: hit.memory.content.text, score: hit.score, via: [...hit.sources] };
  }

  async close(): Promise<void> {
    this.stopHeartbeats();
    await this.thread.close();
  }
}

/**
 * @cairn/memory types its provider's context with an index signature that compose's
 * context type lacks; the call is the same, so this only restates the type.
 */
function summarizeVia(hits: readonly SearchHit[]): string {
  let both = 0;
  let vector = 0;
  let keyword = 0;
  for (const h of hits) {
    if (h.via.includes('vector') && h.via.includes('keyword')) both++;
    else if (h.via.includes('vector')) vector++;
    else keyword++;
  }
  return `(found by both rankings ${both}, vector only ${vector}, keyword only ${keyword})`;
}

/** Shows the scope rule at work: Alice's notes are recalled in her room, never in Bob's. */
async function showScopes(
  term: Terminal,
  memory: AgentMemory,
  aliceRoom: string,
  bobRoom: string,
): Promise<void> {
  term.heading("Scopes: one user's uploads stay in their conversation");
  const query = 'hairy vetch nitrate maize plot field notes';
  const isNote = (h: RecallHit) => h.memory.metadata.upload === ALICE_NOTES.name;
  const forAlice = await memory.recall(query, { viewer: viewerFor(aliceRoom), limit: 5 });
  const forBob = await memory.recall(query, { viewer: viewerFor(bobRoom), limit: 5 });
  const aliceRank = forAlice.findIndex(isNote);
  term.line(`  recall "${query}"`);
  term.line(
    `  as Alice: ${forAlice.length} hits; her ${ALICE_NOTES.name} is ${aliceRank === -1 ? term.yellow('missing') : term.green(`#${aliceRank + 1}`)}` +
      (aliceRank === -1
        ? ''
        : term.dim(
            ` (score ${forAlice[aliceRank]!.score.toFixed(4)}, via ${forAlice[aliceRank]!.sources.join('+')})`,
          )),
  );
  const leaked = forBob.filter(isNote).length;
  term.line(
    `  as Bob:   ${forBob.length} hits; Alice's notes among them: ${leaked === 0 ? term.green('0 (scope room, other room)') : term.yellow(String(leaked))}`,
  );
  if (aliceRank === -1 || leaked > 0)
    throw new Error("the scope check failed: Alice's notes were not recalled for her only");
}
