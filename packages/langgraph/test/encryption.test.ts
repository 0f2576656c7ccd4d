import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type EncryptionOptions, localKeyring } from '@cairn/store';
import { createSqliteStore } from '@cairn/store-sqlite';
import { HumanMessage } from '@langchain/core/messages';
import { afterAll, describe, expect, it } from 'vitest';
import { CairnSaver } from '../src/index.js';
import { chatGraph } from './scripts.js';

const dir = mkdtempSync(join(tmpdir(), 'cairn-langgraph-encryption-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const encryption = { keyring: localKeyring('the saver test’s secret, 32 bytes or more') };

/** A chat of `turns` turns on a SQLite file, each human message a unique canary. */
async function chat(path: string, enc: EncryptionOptions | undefined, turns: number) {
  const store = createSqliteStore({ path }, enc ? { encryption: enc } : {});
  const graph = chatGraph(new CairnSaver(store));
  const config = { configurable: { thread_id: 'chat' } };
  const canaries: string[] = [];
  for (let i = 0; i < turns; i++) {
    const canary = `canary${i}x${Math.random().toString(36).slice(2)}`;
    canaries.push(canary);
    await graph.invoke({ messages: [new HumanMessage({ id: `h-${i}`, content: canary })] }, config);
  }
  const state = await graph.getState(config);
  const contents = (state.values.messages as Array<{ content: unknown }>).map((m) => m.content);
  await store.close();
  const raw = ['', '-wal']
    .map((suffix) => {
      try {
        return readFileSync(`${path}${suffix}`).toString('latin1');
      } catch {
        return '';
      }
    })
    .join('\n');
  return { canaries, contents, raw };
}

describe('CairnSaver on a store with encryption', () => {
  it('keeps checkpoints and their messages sealed: no canary in the file or its WAL', async () => {
    // Without encryption the audit sees them: it can tell.
    const plain = await chat(join(dir, 'plain.db'), undefined, 10);
    expect(plain.canaries.filter((c) => plain.raw.includes(c)).length).toBeGreaterThan(0);

    const sealed = await chat(join(dir, 'sealed.db'), encryption, 10);
    expect(sealed.canaries.filter((c) => sealed.raw.includes(c))).toEqual([]);
    // The graph reads back what it wrote, as the plain store's does (replies quote the canaries).
    expect(sealed.contents.filter((_c, i) => i % 2 === 0)).toEqual(sealed.canaries);
    expect(sealed.contents).toHaveLength(plain.contents.length);
  });
});
