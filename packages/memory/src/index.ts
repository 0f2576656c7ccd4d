export {
  AgentMemory,
  type AsOf,
  type ConsolidationRunner,
  type ConsolidationRunnerOptions,
  type CreateMemoryOptions,
  createMemory,
  type DocumentInput,
  type IngestedDocument,
  type IngestOptions,
  MAX_DOCUMENT_LENGTH,
  type Progress,
  type RecallHit,
  type RecallMode,
  type RecallOptions,
  type RecentOptions,
  type RememberInput,
  type RememberManyOptions,
  type SupersedeInput,
  type UpdateInput,
  type WriteOptions,
} from './agent-memory.js';
export { type ChunkOptions, chunkText } from './chunk-text.js';
export {
  type CandidateGroup,
  type CandidateReason,
  CONSOLIDATION_LEASE_PREFIX,
  type ConsolidateOptions,
  type ConsolidationDecision,
  type ConsolidationReport,
  type ConsolidationRule,
  type ConsolidationScope,
  consolidationLeaseKey,
  defaultConsolidationRule,
  normalizeText,
} from './consolidation.js';
export { type Embedder, type EmbedOptions, embedChecked } from './embedder.js';
export { type HashingEmbedderOptions, hashingEmbedder } from './hashing-embedder.js';
export {
  type MemoriesProviderOptions,
  memoriesProvider,
  type RecalledMemory,
} from './memories-provider.js';
export { type OpenAIEmbedderOptions, openAIEmbedder } from './openai-embedder.js';
export {
  type FusedItem,
  hybridFusion,
  type RankingName,
  reciprocalRankFusion,
} from './rank-fusion.js';
