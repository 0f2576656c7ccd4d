import {
  checkKeys,
  type JsonValue,
  type Message,
  type Provider,
  type StateSchema,
} from '@cairn/core';
import type { CairnThread } from './thread.js';

/**
 * The text of a message's data: the data itself when it is a string, its `text` when
 * that is a string, else the data as JSON.
 *
 * @example
 * ```ts
 * messageText({ text: 'hello', lang: 'en' }); // 'hello'
 * ```
 */
export function messageText(data: JsonValue): string {
  if (typeof data === 'string') return data;
  if (
    typeof data === 'object' &&
    data !== null &&
    !Array.isArray(data) &&
    typeof data.text === 'string'
  )
    return data.text;
  return JSON.stringify(data);
}

/**
 * The last `limit` messages of the thread's active branch, as `role: text` lines
 * (`values.recentMessages`) and as messages (`data.recentMessages`).
 *
 * @example
 * ```ts
 * const composer = createComposer({ providers: [recentMessagesProvider(thread, { limit: 20 })] });
 * ```
 */
export function recentMessagesProvider(
  thread: Pick<CairnThread<StateSchema<any>>, 'history'>,
  options: { limit?: number; name?: string; position?: number } = {},
): Provider {
  checkKeys(options, 'recentMessagesProvider options', ['limit', 'name', 'position']);
  const limit = options.limit ?? 20;
  return {
    name: options.name ?? 'RECENT_MESSAGES',
    description: `The last ${limit} messages of the thread`,
    position: options.position ?? 0,
    async get() {
      const messages: Message[] = await thread.history({ limit });
      const text = messages.map((m) => `${m.role}: ${messageText(m.data)}`).join('\n');
      return { text, values: { recentMessages: text }, data: { recentMessages: messages } };
    },
  };
}

/**
 * Chosen fields of the thread's state (all thread-scoped fields when `fields` is
 * omitted), as `field: JSON` lines, as values and as data.
 *
 * @example
 * ```ts
 * const provider = threadStateProvider(thread, { fields: ['objective', 'keyInsights'] });
 * ```
 */
export function threadStateProvider<S extends StateSchema<any>>(
  thread: Pick<CairnThread<S>, 'state'>,
  options: { fields?: string[]; name?: string; position?: number } = {},
): Provider {
  checkKeys(options, 'threadStateProvider options', ['fields', 'name', 'position']);
  return {
    name: options.name ?? 'THREAD_STATE',
    description: 'Fields of the thread state',
    position: options.position ?? 0,
    async get() {
      const state = thread.state as Record<string, unknown>;
      const keys = options.fields ?? Object.keys(state);
      const picked: Record<string, unknown> = {};
      for (const k of keys) if (state[k] !== undefined) picked[k] = state[k];
      const text = Object.entries(picked)
        .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)
        .join('\n');
      return { text, values: picked, data: { threadState: picked } };
    },
  };
}
