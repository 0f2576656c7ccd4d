export {
  USE_EMBEDDER_ID,
  type UseEmbedder,
  type UseEmbedderOptions,
  useEmbedder,
} from './use-embedder.js';
