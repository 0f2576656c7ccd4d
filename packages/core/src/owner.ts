import { notFound } from './errors.js';
import type { Thread } from './model.js';

/**
 * The owner rule of the integrations (a chat, a session): a caller acting for `resourceId`
 * may use a thread only when the thread's `resourceId` is that one (`null` matches only a
 * thread without an owner). Another owner's thread is `NOT_FOUND` as `what`, with the
 * message a missing one gets, so a stranger learns nothing from a read. Without a
 * `resourceId` (`undefined`: server code that checked already) and for no thread (`null`),
 * nothing is checked.
 *
 * @example
 * ```ts
 * checkOwner(await store.getThread(chatId), 'user-2', 'chat'); // throws: chat "…" not found
 * ```
 */
export function checkOwner(
  thread: Pick<Thread, 'id' | 'resourceId'> | null,
  resourceId: string | null | undefined,
  what: string,
): void {
  if (resourceId === undefined || thread === null || thread.resourceId === resourceId) return;
  throw notFound(what, thread.id);
}
