export {
  type ChatBranch,
  ChatStore,
  type ChatStoreOptions,
  type CreateChatOptions,
  createChatStore,
  type MessageVersions,
  type SaveChatOptions,
  type SaveChatResult,
  UI_MESSAGE_TYPE,
} from './chat-store.js';
