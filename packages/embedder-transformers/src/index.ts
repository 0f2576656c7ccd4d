export {
  type FeatureExtractor,
  type TransformersEmbedder,
  type TransformersEmbedderOptions,
  transformersEmbedder,
} from './transformers-embedder.js';
