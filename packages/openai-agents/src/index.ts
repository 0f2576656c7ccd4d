export {
  AGENT_ITEM_TYPE,
  CairnSession,
  type CairnSessionOptions,
  POPPED_CHECKPOINT,
} from './cairn-session.js';
