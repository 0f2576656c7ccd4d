#!/usr/bin/env node
import { createMemoryStore } from '@cairn/store';

/**
 * The placeholder demo: stores a short conversation in the in-memory store and reads it
 * back. The research-assistant scenario replaces it as soon as the engine packages land.
 */
async function main(): Promise<void> {
  const store = createMemoryStore();
  const thread = await store.createThread({ resourceId: 'demo-user', title: 'Cover crops' });
  const [question, answer] = await store.addMessages([
    {
      id: 'm1',
      threadId: thread.id,
      parentId: null,
      role: 'user',
      data: { text: 'Do cover crops add nitrogen?' },
    },
    {
      id: 'm2',
      threadId: thread.id,
      parentId: 'm1',
      role: 'assistant',
      data: { text: 'Legume cover crops do: their rhizobia fix nitrogen from the air.' },
    },
  ]);
  await store.createBranch({ threadId: thread.id, name: 'main', headMessageId: answer!.id });
  const main = await store.getActiveBranch(thread.id);
  const chain = await store.getChain(main!.headMessageId!);
  console.log(
    `thread ${thread.id} (${thread.title}), branch ${main!.name}, ${chain.length} messages:`,
  );
  for (const m of chain)
    console.log(`  [${m.depth}] ${m.role}: ${(m.data as { text: string }).text}`);
  console.log(question ? 'read back from the store: ok' : 'nothing stored');
  await store.close();
}

main().catch((error: unknown) => {
  console.error(`error: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
});
