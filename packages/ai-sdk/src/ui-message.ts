import { invalidArgument } from '@cairn/core';
import type { UIMessage } from 'ai';

/** The roles the AI SDK gives a `UIMessage`. */
const ROLES: ReadonlySet<string> = new Set(['system', 'user', 'assistant']);

/**
 * Checks the shape the AI SDK requires of a `UIMessage` (a non-empty string id, a known
 * role, parts an array) without reading its content: cheap enough for every message of a
 * long list. `INVALID_ARGUMENT` names the position.
 */
export function checkShape(m: unknown, i: number): asserts m is UIMessage {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) {
    throw invalidArgument(`messages[${i}] must be a UIMessage object`, { index: i });
  }
  const { id, role, parts } = m as Partial<UIMessage>;
  if (typeof id !== 'string' || id.length === 0) {
    throw invalidArgument(`messages[${i}].id must be a non-empty string, got ${String(id)}`, {
      index: i,
    });
  }
  if (typeof role !== 'string' || !ROLES.has(role)) {
    throw invalidArgument(
      `messages[${i}].role must be 'system', 'user' or 'assistant', got ${JSON.stringify(role)}`,
      { index: i, id },
    );
  }
  if (!Array.isArray(parts)) {
    throw invalidArgument(`messages[${i}].parts must be an array`, { index: i, id });
  }
}
