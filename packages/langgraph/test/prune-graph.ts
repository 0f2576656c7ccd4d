// A human-in-the-loop agent for the prune tests: each round the agent asks for two tools that
// run side by side; `calc` runs at once, `search` asks to approve its query first, then
// `review` asks to approve the results before it publishes them. Every node execution and
// every tool run is counted per thread.
import {
  AIMessage,
  type BaseMessage,
  HumanMessage,
  isAIMessage,
  ToolMessage,
} from '@langchain/core/messages';
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  Annotation,
  type BaseCheckpointSaver,
  Command,
  END,
  interrupt,
  messagesStateReducer,
  START,
  StateGraph,
} from '@langchain/langgraph';

const State = Annotation.Root({
  messages: Annotation<BaseMessage[]>({ reducer: messagesStateReducer, default: () => [] }),
  notes: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  rounds: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
});
type S = typeof State.State;

/** Counts by `thread:what`: node executions (`agent`, `search`, ...) and tool runs (`tool:search`, ...). */
export type Counts = Map<string, number>;

/** The rounds with tool calls; the round after them answers without tools. */
const TOOL_ROUNDS = 2;

export function hitlGraph(checkpointer: BaseCheckpointSaver, counts: Counts) {
  const count = (config: RunnableConfig, what: string) => {
    const key = `${String(config.configurable?.thread_id)}:${what}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  };
  const call = (s: S, name: string) => {
    const last = s.messages.findLast(isAIMessage);
    return last?.tool_calls?.find((c) => c.name === name);
  };
  return new StateGraph(State)
    .addNode('agent', async (s: S, config: RunnableConfig) => {
      count(config, 'agent');
      const round = s.rounds + 1;
      const tools = round <= TOOL_ROUNDS;
      return {
        rounds: round,
        messages: [
          new AIMessage({
            id: `ai-${s.messages.length}`,
            content: `round ${round}: ${s.messages.length} messages, notes ${s.notes.join('|')}`,
            tool_calls: tools
              ? [
                  { id: `search-${s.messages.length}`, name: 'search', args: { q: round } },
                  { id: `calc-${s.messages.length}`, name: 'calc', args: { x: round } },
                ]
              : [],
          }),
        ],
      };
    })
    .addNode('search', async (s: S, config: RunnableConfig) => {
      count(config, 'search');
      const c = call(s, 'search')!;
      const query = interrupt({ approve: 'query', q: c.args.q });
      count(config, 'tool:search');
      return {
        messages: [
          new ToolMessage({
            id: `tool-${c.id}`,
            tool_call_id: c.id!,
            content: `search ${c.args.q}: ${query}`,
          }),
        ],
        notes: [`searched ${c.args.q}`],
      };
    })
    .addNode('review', async (s: S, config: RunnableConfig) => {
      count(config, 'review');
      const verdict = interrupt({ approve: 'results', of: s.messages.length });
      count(config, 'tool:publish');
      return { notes: [`published ${s.rounds}: ${verdict}`] };
    })
    .addNode('calc', async (s: S, config: RunnableConfig) => {
      count(config, 'calc');
      count(config, 'tool:calc');
      const c = call(s, 'calc')!;
      return {
        messages: [
          new ToolMessage({ id: `tool-${c.id}`, tool_call_id: c.id!, content: `calc ${c.args.x}` }),
        ],
      };
    })
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', (s: S) => {
      const last = s.messages[s.messages.length - 1];
      return last && isAIMessage(last) && (last.tool_calls?.length ?? 0) > 0
        ? ['search', 'calc']
        : END;
    })
    .addEdge('search', 'review')
    .addEdge('calc', 'review')
    .addEdge('review', 'agent')
    .compile({ checkpointer });
}

type Graph = ReturnType<typeof hitlGraph>;
export const threadConfig = (thread_id: string): RunnableConfig => ({
  configurable: { thread_id },
});

/** Answers the graph's interrupts until it stops asking (at most `max` times). */
export async function resumeAll(graph: Graph, config: RunnableConfig, tag: string, max = 12) {
  for (let k = 1; k <= max; k++) {
    const state = await graph.getState(config);
    if (state.next.length === 0) return;
    await graph.invoke(new Command({ resume: `${tag}-${k}` }), config);
  }
  throw new Error(`the graph still asks after ${max} answers`);
}

/**
 * Builds thread `i` to one of five points: stopped at the first question (beside `calc`'s
 * writes), at the review of the first round, at the review of the second round, run to the end then forked from
 * its first question by `updateState` and run into the fork's question, or run to the end.
 */
export async function buildThread(graph: Graph, threadId: string, i: number): Promise<void> {
  const config = threadConfig(threadId);
  await graph.invoke({ messages: [new HumanMessage({ id: 'h-0', content: `task ${i}` })] }, config);
  const variant = i % 5;
  if (variant === 0) return;
  if (variant === 1) {
    await graph.invoke(new Command({ resume: 'q' }), config);
    return;
  }
  if (variant === 2) {
    for (const answer of ['q', 'r', 'q2']) {
      await graph.invoke(new Command({ resume: answer }), config);
    }
    return;
  }
  await resumeAll(graph, config, `build-${i}`);
  if (variant === 4) return;
  const past: Array<{ config: RunnableConfig; next: string[]; values: S }> = [];
  for await (const s of graph.getStateHistory(config)) past.push(s as (typeof past)[number]);
  const firstQuestion = past.findLast((s) => s.next.includes('search'))!;
  const fork = await graph.updateState(firstQuestion.config, { notes: [`fork ${i}`] }, 'agent');
  await graph.invoke(null, fork);
}
