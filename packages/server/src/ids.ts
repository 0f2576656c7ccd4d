import { createHash } from 'node:crypto';

/** The UUID namespace the LangGraph API derives a graph's assistant id from. */
const GRAPH_NAMESPACE = '6ba7b821-9dad-11d1-80b4-00c04fd430c8';

/** A name-based UUID (version 5, SHA-1), as `uuid.v5(name, namespace)` makes it. */
export function uuid5(name: string, namespace: string): string {
  const ns = Buffer.from(namespace.replaceAll('-', ''), 'hex');
  const bytes = createHash('sha1').update(ns).update(name, 'utf8').digest().subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x50;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const h = bytes.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** The id of the assistant the server makes for a graph: the same as the LangGraph API server's. */
export const graphAssistantId = (graphId: string) => uuid5(graphId, GRAPH_NAMESPACE);
