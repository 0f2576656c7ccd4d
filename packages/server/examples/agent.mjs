// A chat agent with a fake model that streams its answer token by token (no network):
// "<n> messages so far; you said: <last message>". `sleepMs` in the input slows each token.
import { AIMessage } from '@langchain/core/messages';
import { FakeListChatModel } from '@langchain/core/utils/testing';
import {
  Annotation,
  END,
  interrupt,
  MessagesAnnotation,
  START,
  StateGraph,
} from '@langchain/langgraph';

const State = Annotation.Root({
  ...MessagesAnnotation.spec,
  sleepMs: Annotation({ reducer: (_, b) => b, default: () => 0 }),
  interrupt: Annotation({ reducer: (_, b) => b, default: () => false }),
});

const agent = async (state, config) => {
  if (state.interrupt) interrupt('approve?');
  const last = state.messages.at(-1);
  const answer = `${state.messages.length} messages so far; you said: ${last?.content ?? ''}`;
  const model = new FakeListChatModel({ responses: [answer], sleep: state.sleepMs || undefined });
  const chunks = [];
  for await (const chunk of await model.stream(state.messages, config)) chunks.push(chunk.content);
  config.writer?.({ tokens: chunks.length });
  return {
    messages: [
      new AIMessage({
        content: chunks.join(''),
        id: `ai-${state.messages.length}-${config.configurable.run_id}`,
      }),
    ],
  };
};

export const graph = new StateGraph(State)
  .addNode('agent', agent)
  .addEdge(START, 'agent')
  .addEdge('agent', END)
  .compile();

export const makeGraph = () => graph;
