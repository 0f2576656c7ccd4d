// The workers bench's LangGraph turn (bench/src/turns.ts), which the saver's tests measure too.
import { AIMessage } from '@langchain/core/messages';
import {
  Annotation,
  type BaseCheckpointSaver,
  END,
  MessagesAnnotation,
  START,
  StateGraph,
} from '@langchain/langgraph';

export const State = Annotation.Root({
  ...MessagesAnnotation.spec,
  counter: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
  last: Annotation<string>(),
});

/** The input and three nodes: four checkpoints and four tasks' writes a turn. */
export function turnGraph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(State)
    .addNode('count', () => ({ counter: 1 }))
    .addNode('note', (s) => ({ last: `turn ${s.counter}` }))
    .addNode('agent', (s) => ({ messages: [new AIMessage(`reply to ${s.messages.length}`)] }))
    .addEdge(START, 'count')
    .addEdge('count', 'note')
    .addEdge('note', 'agent')
    .addEdge('agent', END)
    .compile({ checkpointer });
}
