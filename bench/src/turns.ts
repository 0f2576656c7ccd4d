/**
 * What the `workers` suite and its worker processes (workers/pg-turns.ts) share: the
 * configuration and result of a worker, the thread state and the LangGraph graph of a turn.
 */
import { defineState, field } from '@cairn/core';
import { AIMessage } from '@langchain/core/messages';
import {
  Annotation,
  type BaseCheckpointSaver,
  END,
  MessagesAnnotation,
  START,
  StateGraph,
} from '@langchain/langgraph';

export type Mode = 'cairn' | 'cairn-saver' | 'pg-saver';

export interface Config {
  mode: Mode;
  url: string;
  /** Cairn's schema (threads, or leases and CairnSaver's checkpoints). */
  schema: string;
  /** PostgresSaver's schema (`pg-saver`). */
  saverSchema: string;
  worker: number;
  own: string[];
  shared: string[];
  turns: number;
}

export interface Result {
  /** Milliseconds per turn, lease wait included. */
  latencies: number[];
  /** Turns completed per thread id. */
  turnsOn: Record<string, number>;
  /** Times a lease was found held by another worker. */
  leaseWaits: number;
  ms: number;
}

/** Thread state of the `cairn` mode (and the graph's): a count of turns and the last one's name. */
export const TurnState = defineState({
  counter: field<number, number>({ reducer: (a, b) => (a ?? 0) + (b ?? 0), default: () => 0 }),
  last: field<string>(),
});

export const GraphState = Annotation.Root({
  ...MessagesAnnotation.spec,
  counter: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
  last: Annotation<string>(),
});

/** The graph of the LangGraph modes: one turn is the input and three nodes, four checkpoints. */
export function turnGraph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(GraphState)
    .addNode('count', () => ({ counter: 1 }))
    .addNode('note', (s) => ({ last: `turn ${s.counter}` }))
    .addNode('agent', (s) => ({ messages: [new AIMessage(`reply to ${s.messages.length}`)] }))
    .addEdge(START, 'count')
    .addEdge('count', 'note')
    .addEdge('note', 'agent')
    .addEdge('agent', END)
    .compile({ checkpointer });
}
