// A LangGraph.js agent on Cairn: a deterministic fake model (no network), a SQLite file,
// time travel and a fork, then the same thread as Cairn sees it.
import { CairnSaver, CairnStore } from '@cairn/langgraph';
import { createSqliteStore } from '@cairn/store-sqlite';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';

const path = process.argv[2] ?? 'agent.db';
const store = createSqliteStore({ path });
const checkpointer = new CairnSaver(store);
const memories = new CairnStore(store);

// The "model": answers the last question and remembers the user's name in the long-term store.
const agent = async (state, config) => {
  const question = String(state.messages.at(-1).content);
  const name = question.match(/I am (\w+)/)?.[1];
  if (name) await config.store.put(['users', 'u1'], 'profile', { name });
  const profile = await config.store.get(['users', 'u1'], 'profile');
  const answer = `(${state.messages.length} messages so far) ${profile ? `${profile.value.name}, ` : ''}you asked: ${question}`;
  return { messages: [new AIMessage(answer)] };
};

const graph = new StateGraph(MessagesAnnotation)
  .addNode('agent', agent)
  .addEdge(START, 'agent')
  .addEdge('agent', END)
  .compile({ checkpointer, store: memories });

const config = { configurable: { thread_id: 'demo-thread' } };
for (const q of ['Hello, I am Ada', 'What is a cairn?', 'And a checkpoint?']) {
  const { messages } = await graph.invoke({ messages: [new HumanMessage(q)] }, config);
  console.log(`> ${q}\n< ${messages.at(-1).content}`);
}

// Time travel: the checkpoint right after the first answer, and a fork from it.
const history = [];
for await (const snapshot of graph.getStateHistory(config)) history.push(snapshot);
const afterFirst = history.find((s) => s.values.messages.length === 2 && s.next.length === 0);
const forked = await graph.invoke(
  { messages: [new HumanMessage('Tell me about branches instead')] },
  afterFirst.config,
);
console.log(`fork: ${forked.messages.length} messages, last: ${forked.messages.at(-1).content}`);
const now = await graph.getState(config);
console.log(`the thread's latest checkpoint is the fork: ${now.values.messages.length} messages`);

// The same thread in Cairn: one message DAG, the fork shares the first two messages.
const branch = await store.getBranch('demo-thread', 'langgraph');
const chain = await store.getChain(branch.headMessageId);
console.log(`Cairn chain: ${chain.map((m) => m.role).join(' -> ')}`);
console.log(`open it in the inspector: cairn inspect ${path}`);
await store.close();
