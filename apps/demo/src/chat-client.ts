import { CairnError } from '@cairn/core';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** An OpenAI-compatible chat endpoint, used only when the environment names one. */
export interface ChatClient {
  readonly model: string;
  readonly baseUrl: string;
  complete(messages: ChatMessage[], options?: { timeoutMs?: number }): Promise<string>;
}

/**
 * The chat client named by `CAIRN_CHAT_BASE_URL` and `CAIRN_CHAT_MODEL` (plus
 * `CAIRN_CHAT_API_KEY` when the endpoint needs one), or null when they are not set:
 * then the demo never makes a network call.
 *
 * @example
 * ```ts
 * const chat = chatClientFromEnv(process.env); // null unless configured
 * const text = await chat?.complete([{ role: 'user', content: 'Hi' }]);
 * ```
 */
export function chatClientFromEnv(env: NodeJS.ProcessEnv): ChatClient | null {
  const baseUrl = env.CAIRN_CHAT_BASE_URL?.trim();
  const model = env.CAIRN_CHAT_MODEL?.trim();
  if (!baseUrl || !model) return null;
  const apiKey = env.CAIRN_CHAT_API_KEY?.trim();
  const url = `${baseUrl.replace(/\/+$/, '')}/chat/completions`;
  return {
    model,
    baseUrl,
    async complete(messages, options = {}) {
      let response: Response;
      try {
        response = await fetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
          },
          body: JSON.stringify({ model, messages, temperature: 0.2 }),
          signal: AbortSignal.timeout(options.timeoutMs ?? 30_000),
        });
      } catch (error) {
        throw new CairnError(
          'PROVIDER_FAILED',
          `chat endpoint ${url} unreachable: ${(error as Error).message}`,
        );
      }
      if (!response.ok) {
        throw new CairnError(
          'PROVIDER_FAILED',
          `chat endpoint ${url} answered ${response.status} ${response.statusText}`,
        );
      }
      const body = (await response.json()) as {
        choices?: Array<{ message?: { content?: unknown } }>;
      };
      const content = body.choices?.[0]?.message?.content;
      if (typeof content !== 'string' || content.trim() === '') {
        throw new CairnError('PROVIDER_FAILED', `chat endpoint ${url} returned no message content`);
      }
      return content.trim();
    },
  };
}
