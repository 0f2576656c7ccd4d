// The graphs and scripts the differential test runs on LangGraph's savers and on Cairn.
// Everything is deterministic: messages carry explicit ids, the model is a fake.
import {
  AIMessage,
  type BaseMessage,
  HumanMessage,
  isBaseMessage,
  RemoveMessage,
} from '@langchain/core/messages';
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  Annotation,
  type BaseCheckpointSaver,
  Command,
  END,
  interrupt,
  MessagesAnnotation,
  MessagesDeltaValue,
  messagesStateReducer,
  REMOVE_ALL_MESSAGES,
  START,
  StateGraph,
  StateSchema,
} from '@langchain/langgraph';

/** A deterministic chat model: replies to the last message, numbering its replies. */
export function fakeModel(prefix = 'ai') {
  let n = 0;
  return (messages: BaseMessage[]) => {
    const last = messages[messages.length - 1];
    n++;
    return new AIMessage({
      id: `${prefix}-${n}`,
      content: `reply ${n} to ${String(last?.content ?? '')} (${messages.length} in context)`,
    });
  };
}

const human = (id: string, content = id) => new HumanMessage({ id, content });

/** What a run observed: every state read, in order. */
export type Transcript = unknown[];

/**
 * A value as the comparison sees it: messages as their class name and serialized form, object
 * keys sorted, times dropped, and every UUID-shaped id replaced by the order it first appeared
 * in (checkpoint and task ids are time-based, so they differ between runs).
 */
export function normalizer() {
  const labels = new Map<string, string>();
  const ID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{32}\b/g;
  const label = (s: string) =>
    s.replace(ID, (id) => {
      if (!labels.has(id)) labels.set(id, `<id ${labels.size + 1}>`);
      return labels.get(id)!;
    });
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return label(v);
    if (isBaseMessage(v))
      return { class: v.constructor.name, json: walk(JSON.parse(JSON.stringify(v))) };
    if (Array.isArray(v)) return v.map(walk);
    if (v instanceof Error) return { error: v.constructor.name, message: label(v.message) };
    if (typeof v === 'object' && v !== null) {
      const out: Record<string, unknown> = {};
      for (const k of Object.keys(v).sort()) {
        if (k === 'createdAt' || k === 'ts') continue;
        out[label(k)] = walk((v as Record<string, unknown>)[k]);
      }
      return out;
    }
    return v;
  };
  return walk;
}

type Graph = {
  getState(config: RunnableConfig, options?: { subgraphs?: boolean }): Promise<unknown>;
  getStateHistory(config: RunnableConfig): AsyncIterableIterator<unknown>;
};

/** Reads every state the script asks about, and at the end the whole history of each thread. */
export class Recorder {
  readonly transcript: Transcript = [];
  readonly #norm = normalizer();
  async state(graph: Graph, config: RunnableConfig, subgraphs = false) {
    this.transcript.push(this.#norm(await graph.getState(config, { subgraphs })));
  }
  note(value: unknown) {
    this.transcript.push(this.#norm(value));
  }
}

export async function history(graph: Graph, config: RunnableConfig): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const s of graph.getStateHistory(config)) out.push(s);
  return out;
}

const cfg = (thread_id: string, extra: Record<string, unknown> = {}): RunnableConfig => ({
  configurable: { thread_id, ...extra },
});

// ------------------------------------------------------------------ a chat agent

export function chatGraph(checkpointer: BaseCheckpointSaver) {
  const model = fakeModel();
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (s) => ({ messages: [model(s.messages)] }))
    .addEdge(START, 'agent')
    .addEdge('agent', END)
    .compile({ checkpointer });
}

/** Turns, an edit of an earlier message by id, RemoveMessage, REMOVE_ALL, and two kinds of forks. */
export async function chatScript(checkpointer: BaseCheckpointSaver, r: Recorder) {
  const graph = chatGraph(checkpointer);
  const thread = cfg('chat');
  for (const id of ['h-1', 'h-2', 'h-3']) {
    await graph.invoke({ messages: [human(id)] }, thread);
    await r.state(graph, thread);
  }
  // Edit an earlier reply in place under its id: same ids, different content.
  await graph.updateState(thread, { messages: [new AIMessage({ id: 'ai-1', content: 'edited' })] });
  await r.state(graph, thread);
  await graph.invoke({ messages: [human('h-4')] }, thread);
  await r.state(graph, thread);
  // Remove the first message: the common prefix with the parent is empty.
  await graph.updateState(thread, { messages: [new RemoveMessage({ id: 'h-1' })] });
  await r.state(graph, thread);
  await graph.invoke({ messages: [human('h-5')] }, thread);
  await r.state(graph, thread);

  // Two forks of one checkpoint (the one after the second turn) both write `messages`.
  const past = (await history(graph, thread)) as Array<{
    config: RunnableConfig;
    values: { messages: BaseMessage[] };
    next: string[];
  }>;
  const afterTurn2 = past.find((s) => s.values.messages.length === 4 && s.next.length === 0)!;
  for (const id of ['fork-a', 'fork-b']) {
    const forked = await graph.invoke({ messages: [human(id)] }, afterTurn2.config);
    r.note(forked);
  }
  // A fork by updateState on that same checkpoint, then a turn on it.
  const updated = await graph.updateState(afterTurn2.config, { messages: [human('fork-c')] });
  await r.state(graph, updated);
  r.note(await graph.invoke(null, updated));
  await r.state(graph, thread);

  // Clear everything, then go on.
  await graph.updateState(thread, {
    messages: [new RemoveMessage({ id: REMOVE_ALL_MESSAGES })],
  });
  await r.state(graph, thread);
  await graph.invoke({ messages: [human('h-6')] }, thread);
  await r.state(graph, thread);
  return { graph, threads: [thread] };
}

// ------------------------------------------------------------------ interrupts in a subgraph

const SubState = Annotation.Root({
  messages: Annotation<BaseMessage[]>({ reducer: messagesStateReducer, default: () => [] }),
  approvals: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
});

export function approvalGraph(checkpointer: BaseCheckpointSaver) {
  const model = fakeModel('agent');
  const sub = new StateGraph(SubState)
    .addNode('ask', async (s) => {
      const answer = interrupt({ question: 'approve?', pending: s.messages.length });
      return {
        messages: [
          new AIMessage({ id: `approved-${s.messages.length}`, content: `approved: ${answer}` }),
        ],
        approvals: 1,
      };
    })
    .addEdge(START, 'ask')
    .addEdge('ask', END)
    .compile();
  return new StateGraph(SubState)
    .addNode('agent', async (s) => ({ messages: [model(s.messages)] }))
    .addNode('review', sub)
    .addEdge(START, 'agent')
    .addEdge('agent', 'review')
    .addEdge('review', END)
    .compile({ checkpointer });
}

/** An interrupt inside a subgraph (a checkpoint namespace of its own), then a resume. */
export async function approvalScript(checkpointer: BaseCheckpointSaver, r: Recorder) {
  const graph = approvalGraph(checkpointer);
  const thread = cfg('approvals');
  for (const [id, answer] of [
    ['q-1', 'yes'],
    ['q-2', 'no'],
  ] as const) {
    r.note(await graph.invoke({ messages: [human(id)] }, thread));
    await r.state(graph, thread, true);
    r.note(await graph.invoke(new Command({ resume: answer }), thread));
    await r.state(graph, thread, true);
  }
  return { graph, threads: [thread] };
}

// ------------------------------------------------------------------ custom reducers

/** Dedupe, keeping the first occurrence, in order. */
export function mergeArtifacts(existing: string[] = [], update: string[] = []): string[] {
  return [...new Set([...existing, ...update])];
}

/** Merge; an empty object clears. */
export function mergeViewedImages(
  existing: Record<string, string> = {},
  update: Record<string, string> = {},
): Record<string, string> {
  return Object.keys(update).length === 0 ? {} : { ...existing, ...update };
}

const ResearchState = Annotation.Root({
  ...MessagesAnnotation.spec,
  artifacts: Annotation<string[]>({ reducer: mergeArtifacts, default: () => [] }),
  viewed_images: Annotation<Record<string, string>>({
    reducer: mergeViewedImages,
    default: () => ({}),
  }),
});

export function researchGraph(checkpointer: BaseCheckpointSaver) {
  const model = fakeModel('research');
  let step = 0;
  return new StateGraph(ResearchState)
    .addNode('research', async (s) => {
      step++;
      return {
        messages: [model(s.messages)],
        artifacts: [`paper-${step}`, `paper-${step - 1}`, 'notes'],
        viewed_images: { [`fig-${step}`]: `https://example.test/${step}.png` },
      };
    })
    .addNode('tidy', async (s) => (s.artifacts.length > 4 ? { viewed_images: {} } : {}))
    .addEdge(START, 'research')
    .addEdge('research', 'tidy')
    .addEdge('tidy', END)
    .compile({ checkpointer });
}

/** The research agent: custom reducers (dedupe keeping first; merge where `{}` clears). */
export async function researchScript(checkpointer: BaseCheckpointSaver, r: Recorder) {
  const graph = researchGraph(checkpointer);
  const thread = cfg('research');
  for (const id of ['topic-1', 'topic-2', 'topic-3', 'topic-4']) {
    await graph.invoke({ messages: [human(id)] }, thread);
    await r.state(graph, thread);
  }
  await graph.updateState(thread, { artifacts: ['notes', 'manual'], viewed_images: {} });
  await r.state(graph, thread);
  return { graph, threads: [thread] };
}

// ------------------------------------------------------------------ delta channel

export function deltaGraph(checkpointer: BaseCheckpointSaver) {
  const model = fakeModel('delta');
  const State = new StateSchema({ messages: MessagesDeltaValue });
  return new StateGraph(State)
    .addNode('agent', async (s: { messages: BaseMessage[] }) => ({ messages: [model(s.messages)] }))
    .addEdge(START, 'agent')
    .addEdge('agent', END)
    .compile({ checkpointer });
}

/** `MessagesDeltaValue`: the messages live in writes and are replayed by getDeltaChannelHistory. */
export async function deltaScript(checkpointer: BaseCheckpointSaver, r: Recorder) {
  const graph = deltaGraph(checkpointer);
  const thread = cfg('delta');
  for (const id of ['d-1', 'd-2', 'd-3', 'd-4']) {
    await graph.invoke({ messages: [human(id)] }, thread);
    await r.state(graph, thread);
  }
  return { graph, threads: [thread] };
}

export const scripts = {
  chat: chatScript,
  approvals: approvalScript,
  research: researchScript,
  delta: deltaScript,
};
