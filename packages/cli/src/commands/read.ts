import type { Branch, Checkpoint, Message, Thread } from '@cairn/core';
import type { Store } from '@cairn/store';
import { CliError } from '../database.js';
import { cell, type Io, iso, table } from '../output.js';

/** Every thread (of `resourceId` when given), newest first, at most `limit`. */
export async function allThreads(
  store: Store,
  options: { resourceId?: string; limit?: number } = {},
): Promise<Thread[]> {
  const out: Thread[] = [];
  let cursor: string | null = null;
  const max = options.limit ?? Number.POSITIVE_INFINITY;
  do {
    const page = await store.listThreads({
      ...(options.resourceId === undefined ? {} : { resourceId: options.resourceId }),
      limit: Math.min(1000, max - out.length),
      cursor,
    });
    out.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor !== null && out.length < max);
  return out;
}

export async function threads(
  store: Store,
  options: { resourceId?: string; limit?: number; json: boolean },
  io: Io,
): Promise<number> {
  const list = await allThreads(store, options);
  if (options.json) {
    io.stdout.write(`${JSON.stringify(list, null, 2)}\n`);
    return 0;
  }
  io.stdout.write(
    table(
      ['ID', 'RESOURCE', 'TITLE', 'CREATED', 'UPDATED'],
      list.map((t) => [
        t.id,
        cell(t.resourceId, 30),
        cell(t.title, 40),
        iso(t.createdAt),
        iso(t.updatedAt),
      ]),
    ),
  );
  return 0;
}

/** What `cairn show` prints: the thread, its branches and checkpoints, one branch's chain. */
export interface ThreadView {
  thread: Thread;
  branches: Branch[];
  checkpoints: Checkpoint[];
  /** The branch shown: `--branch`, else the active one (null when the thread has none). */
  branch: Branch | null;
  /** The branch's messages, root first. */
  messages: Message[];
}

export async function viewThread(
  store: Store,
  threadId: string,
  branchName?: string,
): Promise<ThreadView> {
  const thread = await store.getThread(threadId);
  if (!thread) throw new CliError(`thread ${JSON.stringify(threadId)} not found`);
  const branches = await store.listBranches(threadId);
  const branch =
    branchName === undefined
      ? (branches.find((b) => b.isActive) ?? null)
      : (branches.find((b) => b.name === branchName) ?? null);
  if (branchName !== undefined && !branch)
    throw new CliError(
      `thread ${JSON.stringify(threadId)} has no branch ${JSON.stringify(branchName)} (it has ${branches.map((b) => JSON.stringify(b.name)).join(', ') || 'none'})`,
    );
  const messages = branch?.headMessageId ? await store.getChain(branch.headMessageId) : [];
  return { thread, branches, checkpoints: await store.listCheckpoints(threadId), branch, messages };
}

export async function show(
  store: Store,
  threadId: string,
  options: { branch?: string; json: boolean },
  io: Io,
): Promise<number> {
  const v = await viewThread(store, threadId, options.branch);
  if (options.json) {
    io.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
    return 0;
  }
  const t = v.thread;
  io.stdout.write(
    [
      `thread ${t.id}${t.title ? `  ${cell(t.title)}` : ''}`,
      `resource ${t.resourceId ?? '-'}  created ${iso(t.createdAt)}  updated ${iso(t.updatedAt)}`,
      '',
      '',
    ].join('\n'),
  );
  io.stdout.write(
    table(
      ['BRANCH', 'ACTIVE', 'HEAD', 'FORKED AT', 'CREATED'],
      v.branches.map((b) => [
        cell(b.name, 40),
        b.isActive ? '*' : '',
        b.headMessageId ?? '',
        b.forkMessageId ?? '',
        iso(b.createdAt),
      ]),
    ),
  );
  if (v.checkpoints.length > 0) {
    io.stdout.write('\n');
    io.stdout.write(
      table(
        ['CHECKPOINT', 'MESSAGE', 'CREATED'],
        v.checkpoints.map((c) => [cell(c.name, 40), c.messageId, iso(c.createdAt)]),
      ),
    );
  }
  io.stdout.write(`\nmessages of branch ${v.branch ? JSON.stringify(v.branch.name) : '(none)'}:\n`);
  io.stdout.write(
    table(
      ['DEPTH', 'ID', 'ROLE', 'TYPE', 'CREATED', 'DATA'],
      v.messages.map((m) => [
        String(m.depth),
        m.id,
        cell(m.role, 16),
        cell(m.type, 16),
        iso(m.createdAt),
        cell(m.data),
      ]),
    ),
  );
  return 0;
}
