import type { StateSchema } from '@cairn/core';
import {
  convertToModelMessages,
  createIdGenerator,
  simulateReadableStream,
  streamText,
  type UIMessage,
} from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import type { ChatStore, SaveChatResult } from '../src/index.js';

/** A mock model that streams `text` as its reply, in a few deltas. */
export function mockModel(text: string): MockLanguageModelV3 {
  const words = text.split(/(?<= )/);
  return new MockLanguageModelV3({
    doStream: async () => ({
      stream: simulateReadableStream({
        chunks: [
          { type: 'text-start', id: 't1' },
          ...words.map((w) => ({ type: 'text-delta' as const, id: 't1', delta: w })),
          { type: 'text-end', id: 't1' },
          {
            type: 'finish',
            finishReason: { unified: 'stop', raw: undefined },
            usage: {
              inputTokens: { total: 3, noCache: 3, cacheRead: undefined, cacheWrite: undefined },
              outputTokens: { total: words.length, text: words.length, reasoning: undefined },
            },
          },
        ],
      }),
    }),
  });
}

export interface Turn {
  /** What onFinish handed over: the list the client sent plus the reply. */
  messages: UIMessage[];
  reply: UIMessage;
  saved: SaveChatResult;
  /** The streamed response body (SSE). */
  body: string;
}

/**
 * What an AI SDK route handler does: stream the mock model's `reply` to the list the
 * client sent, and save the whole list from `toUIMessageStreamResponse`'s `onFinish`.
 */
export async function chatTurn<S extends StateSchema<any>>(
  chats: ChatStore<S>,
  chatId: string,
  sent: UIMessage[],
  reply: string,
): Promise<Turn> {
  const result = streamText({
    model: mockModel(reply),
    messages: await convertToModelMessages(sent),
  });
  let finished: Promise<Omit<Turn, 'body'>> | undefined;
  const response = result.toUIMessageStreamResponse({
    originalMessages: sent,
    generateMessageId: createIdGenerator({ prefix: 'msg', size: 16 }),
    onFinish: ({ messages, responseMessage }) => {
      finished = chats
        .saveChat({ chatId, messages })
        .then((saved) => ({ messages, reply: responseMessage, saved }));
      return finished.then(() => undefined);
    },
  });
  const body = await response.text();
  if (!finished) throw new Error('onFinish was not called');
  return { ...(await finished), body };
}

let n = 0;
/** A user message as `useChat` sends it. */
export const user = (
  text: string,
  id = `u${++n}-${Math.random().toString(36).slice(2, 8)}`,
): UIMessage => ({
  id,
  role: 'user',
  parts: [{ type: 'text', text }],
});
