export {
  type ChatAccess,
  type ChatBranch,
  ChatStore,
  type ChatStoreOptions,
  type CreateChatOptions,
  createChatStore,
  type LoadChatOptions,
  type MessageVersions,
  type SaveChatOptions,
  type SaveChatResult,
  UI_MESSAGE_TYPE,
} from './chat-store.js';
