import { Command, Send } from '@langchain/langgraph';
import type { CompiledGraphLike, StreamEvent } from './graphs.js';
import type { Json, Run, StreamMode } from './model.js';

/** An event for the run's stream: its SSE name and data. */
export interface RunEvent {
  event: string;
  data: unknown;
}

/** A run's `command` (`{ resume, update, goto }`) as LangGraph's `Command`. */
export function toCommand(command: Json): Command {
  const goto = command.goto as unknown;
  const asSend = (g: unknown) =>
    typeof g === 'object' && g !== null && 'node' in g
      ? new Send((g as { node: string }).node, (g as { input?: unknown }).input)
      : g;
  return new Command({
    ...(command.resume !== undefined ? { resume: command.resume } : {}),
    ...(command.update !== undefined ? { update: command.update as never } : {}),
    ...(goto !== undefined && goto !== null
      ? { goto: (Array.isArray(goto) ? goto.map(asSend) : asSend(goto)) as never }
      : {}),
  });
}

/** Config fields LangGraph keeps for itself (`__pregel_…`), and callbacks: never shown. */
function publicConfig(config: unknown): unknown {
  if (typeof config !== 'object' || config === null) return config;
  const c = config as { configurable?: Json; callbacks?: unknown };
  if (!c.configurable) return config;
  const { callbacks: _, ...rest } = c;
  return {
    ...rest,
    configurable: Object.fromEntries(
      Object.entries(c.configurable).filter(([k]) => !k.startsWith('__')),
    ),
  };
}

/** The checkpoint a config points at, as the protocol shows it. */
function checkpointOf(config: unknown): Json | null {
  const c = (config as { configurable?: Json } | undefined)?.configurable;
  if (!c?.checkpoint_id) return null;
  return {
    thread_id: c.thread_id,
    checkpoint_ns: c.checkpoint_ns ?? '',
    checkpoint_id: c.checkpoint_id,
    checkpoint_map: c.checkpoint_map ?? null,
  };
}

function debugTask(task: Json): Json {
  if (
    typeof task.state !== 'object' ||
    task.state === null ||
    !('configurable' in (task.state as Json))
  )
    return task;
  const { state, ...rest } = task;
  return { ...rest, checkpoint: checkpointOf(state) };
}

function debugCheckpoint(payload: Json): Json {
  const { parentConfig, ...rest } = payload;
  return {
    ...rest,
    config: publicConfig(payload.config),
    parent_config: publicConfig(parentConfig),
    checkpoint: checkpointOf(payload.config),
    parent_checkpoint: checkpointOf(parentConfig),
    tasks: ((payload.tasks as Json[] | undefined) ?? []).map(debugTask),
  };
}

type MessageChunk = { id?: string; concat(other: MessageChunk): MessageChunk };

/**
 * Runs the graph for `run` and yields the events of the stream modes it asked for, as
 * the LangGraph API names them: `metadata` first, then `values`, `updates`, `messages`
 * (tuples) or `messages/partial|complete|metadata`, `custom`, `events`, `debug`, `tasks`,
 * `checkpoints` (with `|<namespace>` for subgraphs when `stream_subgraphs`).
 */
export async function* streamRun(
  run: Run,
  graph: CompiledGraphLike,
  options: { attempt: number; signal: AbortSignal },
): AsyncGenerator<RunEvent> {
  const kwargs = run.kwargs;
  const wanted = new Set<StreamMode>(kwargs.stream_mode);
  // LangGraph's own modes: `messages-tuple` is its `messages`; the API's `messages` is
  // built here from `values` and the chat models' token events.
  const modes = new Set<string>(
    [...wanted].filter((m) => m !== 'events' && m !== 'messages-tuple'),
  );
  if (wanted.has('messages-tuple')) modes.add('messages');
  if (wanted.has('messages')) modes.add('values');

  yield { event: 'metadata', data: { run_id: run.run_id, attempt: options.attempt } };

  const config = kwargs.config;
  const input = kwargs.command ? toCommand(kwargs.command) : (kwargs.input ?? null);
  const events = graph.streamEvents(input, {
    version: 'v2',
    ...(kwargs.interrupt_before !== undefined ? { interruptBefore: kwargs.interrupt_before } : {}),
    ...(kwargs.interrupt_after !== undefined ? { interruptAfter: kwargs.interrupt_after } : {}),
    ...(config.tags !== undefined ? { tags: config.tags } : {}),
    ...(config.recursion_limit !== undefined ? { recursionLimit: config.recursion_limit } : {}),
    ...(kwargs.context !== undefined ? { context: kwargs.context } : {}),
    configurable: config.configurable,
    metadata: { ...(config.metadata as Json | undefined), run_attempt: options.attempt },
    subgraphs: kwargs.subgraphs,
    runId: run.run_id,
    streamMode: [...modes, 'debug'],
    signal: options.signal,
  }) as AsyncIterable<StreamEvent>;

  const partial = new Map<string, MessageChunk>();
  const completed = new Set<string>();

  for await (const event of events) {
    if (event.tags?.includes('langsmith:hidden')) continue;
    const ours =
      event.event === 'on_chain_stream' && (kwargs.subgraphs || event.run_id === run.run_id);
    if (ours) {
      const tuple = (
        kwargs.subgraphs ? event.data.chunk : [null, ...(event.data.chunk as unknown[])]
      ) as [string[] | null, string, unknown];
      const [ns, mode, chunk] = tuple;
      const name = (m: string) => (kwargs.subgraphs && ns?.length ? `${m}|${ns.join('|')}` : m);
      let data = chunk;
      if (mode === 'debug') {
        const d = chunk as { type: string; payload: Json };
        if (d.type === 'checkpoint') data = { ...d, payload: debugCheckpoint(d.payload) };
        else if (d.type === 'task_result') data = { ...d, payload: debugTask(d.payload) };
      } else if (mode === 'tasks') {
        data = debugTask(chunk as Json);
      } else if (mode === 'checkpoints') {
        const c = chunk as Json;
        if (!('values' in c)) continue;
        data = { values: c.values, metadata: c.metadata, next: c.next, ...debugCheckpoint(c) };
      }
      if (mode === 'messages') {
        if (wanted.has('messages-tuple')) yield { event: name('messages'), data };
      } else if (wanted.has(mode as StreamMode)) {
        yield { event: name(mode), data };
      }
    } else if (wanted.has('events')) {
      yield { event: 'events', data: event };
    }

    if (!wanted.has('messages')) continue;
    if (ours) {
      const chunk = (event.data.chunk as unknown[]).at(-1);
      const list = (chunk as { messages?: unknown } | null)?.messages;
      if (typeof chunk !== 'object' || chunk === null || list === undefined) continue;
      const fresh = (Array.isArray(list) ? list : [list]).filter((m: { id?: string }) => {
        if (!m?.id || completed.has(m.id)) return false;
        completed.add(m.id);
        return true;
      });
      if (fresh.length > 0) yield { event: 'messages/complete', data: fresh };
    } else if (event.event === 'on_chat_model_stream' && !event.tags?.includes('nostream')) {
      const message = event.data.chunk as MessageChunk;
      if (!message?.id) continue;
      const seen = partial.get(message.id);
      if (!seen) {
        partial.set(message.id, message);
        yield { event: 'messages/metadata', data: { [message.id]: { metadata: event.metadata } } };
      } else {
        partial.set(message.id, seen.concat(message));
      }
      yield { event: 'messages/partial', data: [partial.get(message.id)] };
    }
  }
}
