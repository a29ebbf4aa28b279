export async function runDemo() { return 1; }
