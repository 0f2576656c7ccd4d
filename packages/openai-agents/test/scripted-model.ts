import type {
  AgentOutputItem,
  Model,
  ModelProvider,
  ModelRequest,
  ModelResponse,
} from '@openai/agents-core';
import { Usage } from '@openai/agents-core';

/** A model that answers from a script, one response per call, and records what it was sent. */
export class ScriptedModel implements Model {
  readonly inputs: unknown[] = [];
  readonly #script: AgentOutputItem[][];

  constructor(script: AgentOutputItem[][]) {
    this.#script = script.map((r) => structuredClone(r));
  }

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.inputs.push(structuredClone(request.input));
    const output = this.#script.shift();
    if (!output) throw new Error('the script has no more responses');
    return { usage: new Usage(), output, responseId: `resp_${this.inputs.length}` };
  }

  // biome-ignore lint/correctness/useYield: run() without streaming never calls it
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('streaming is not scripted');
  }
}

/** A model provider that hands out one scripted model. */
export class ScriptedProvider implements ModelProvider {
  constructor(readonly model: ScriptedModel) {}
  getModel(): Model {
    return this.model;
  }
}

export const say = (id: string, text: string): AgentOutputItem => ({
  type: 'message',
  id,
  role: 'assistant',
  status: 'completed',
  content: [{ type: 'output_text', text }],
});

export const call = (id: string, name: string, args: object): AgentOutputItem => ({
  type: 'function_call',
  id,
  callId: `call_${id}`,
  name,
  arguments: JSON.stringify(args),
  status: 'completed',
});
