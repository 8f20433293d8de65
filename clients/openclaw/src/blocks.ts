// The blocks the plugin injects, and their removal from anything stored.
//
// Two blocks enter a prompt: <persona_memories> (the server's persona lines) and
// <relevant_memories> (the server's recall_block text, verbatim). Each line is
// "- [record_id] content". Both are stripped from messages before they are
// written to the transcript and before a turn is captured, so a recalled memory
// never comes back into memory as if the user had said it.

export const PERSONA_OPEN = "<persona_memories>";
export const PERSONA_CLOSE = "</persona_memories>";
export const RECALL_OPEN = "<relevant_memories>";
export const RECALL_CLOSE = "</relevant_memories>";

/** A closed block, or an unclosed one running to the end (a block cut by a host's limit). */
const BLOCKS = [
  new RegExp(`${PERSONA_OPEN}[\\s\\S]*?(?:${PERSONA_CLOSE}|$)`, "g"),
  new RegExp(`${RECALL_OPEN}[\\s\\S]*?(?:${RECALL_CLOSE}|$)`, "g"),
];

/** The persona lines wrapped as a block; angle brackets in the content are escaped. */
export function personaBlock(lines: string): string {
  const body = lines.replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/\n*$/, "\n");
  return `${PERSONA_OPEN}\n${body}${PERSONA_CLOSE}`;
}

/** True when the text holds an injected block (or the start of one). */
export function hasInjectedBlock(text: string): boolean {
  return text.includes(PERSONA_OPEN) || text.includes(RECALL_OPEN);
}

/** The text without any injected block, blank runs left by the removal collapsed. */
export function stripInjectedBlocks(text: string): string {
  if (!hasInjectedBlock(text)) return text;
  let out = text;
  for (const block of BLOCKS) out = out.replace(block, "");
  return out.replace(/\n{3,}/g, "\n\n").trim();
}

type Part = { type: string; text?: unknown };
type MessageLike = { role?: unknown; content?: unknown };

/** The text of a message: its string content, or its text parts joined by newlines. */
export function messageText(message: unknown): string {
  const content = (message as MessageLike | null)?.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((part): part is Part & { text: string } => (part as Part)?.type === "text" && typeof (part as Part).text === "string")
    .map((part) => part.text)
    .join("\n");
}

/** The role of a message (user, assistant, toolResult ...), or "" when it has none. */
export function messageRole(message: unknown): string {
  const role = (message as MessageLike | null)?.role;
  return typeof role === "string" ? role : "";
}

/**
 * The message with the injected blocks removed from its text, or the same object
 * when it held none; null when nothing but injected blocks was in it.
 */
export function stripMessage<M>(message: M): M | null {
  const content = (message as MessageLike).content;
  if (typeof content === "string") {
    if (!hasInjectedBlock(content)) return message;
    const text = stripInjectedBlocks(content);
    return text ? { ...message, content: text } : null;
  }
  if (!Array.isArray(content)) return message;
  let changed = false;
  const parts: unknown[] = [];
  for (const part of content) {
    const text = (part as Part)?.type === "text" ? (part as Part).text : undefined;
    if (typeof text === "string" && hasInjectedBlock(text)) {
      changed = true;
      const kept = stripInjectedBlocks(text);
      if (kept) parts.push({ ...(part as object), text: kept });
    } else {
      parts.push(part);
    }
  }
  if (!changed) return message;
  return parts.length ? { ...message, content: parts } : null;
}
