// Structured output and tool calling through the clients applications use:
// the openai SDK's parse helpers with zod, a tools round trip, streamed
// tool-call deltas, and LangChain JS's withStructuredOutput and bindTools.
// run.sh's structured stack serves the tiny random-weight model with
// answers of up to 512 tokens: a random model never writes valid JSON by
// chance, so what parses here parses because decoding was constrained.
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { zodResponseFormat, zodFunction, zodTextFormat } from "openai/helpers/zod";
import { z } from "zod";
import { ChatOpenAI } from "@langchain/openai";
import { HumanMessage, ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText, generateObject, tool as aiTool, stepCountIs } from "ai";

const baseURL = process.env.GENQ_OPENAI_STRUCTURED_URL;
const apiKey = process.env.GENQ_API_KEY;
if (!baseURL || !apiKey) {
  throw new Error("GENQ_OPENAI_STRUCTURED_URL and GENQ_API_KEY are required: run test/openai/run.sh (make test-openai)");
}
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });

// A person whose longest answer under its grammar fits the worker's 512
// tokens (a token a byte, at worst, in the tiny vocabulary), so that a
// random model's answer always ends in the grammar's own time: 18 runs of
// whitespace of at most 17 bytes (a newline and 16 spaces) around its 17
// JSON tokens, 306 bytes; a name of 8 characters of at most 12 bytes each
// (an escaped surrogate pair) and its quotes, 98; a number of at most 40;
// the keys, punctuation, "false" and "green", 47: 491 in all. An array of
// objects would add more whitespace than the budget holds.
const Person = z.object({
  name: z.string().max(8),
  age: z.number().int().min(0).max(120),
  member: z.boolean(),
  color: z.enum(["red", "green", "blue"]),
});

const weatherParams = z.object({ city: z.string().max(10), unit: z.enum(["celsius", "fahrenheit"]) });
const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city.",
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 10 }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
      required: ["city", "unit"],
      additionalProperties: false,
    },
  },
};
const timeTool = {
  type: "function",
  function: {
    name: "get_time",
    strict: true,
    parameters: { type: "object", properties: { zone: { type: "string", enum: ["UTC", "CET"] } }, required: ["zone"], additionalProperties: false },
  },
};
const ask = [{ role: "user", content: "What is the weather in Oslo?" }];

test("chat.completions.parse with zodResponseFormat gives an object the schema accepts", async () => {
  for (const seed of [1, 2, 3]) {
    const c = await client.chat.completions.parse({
      model: "genq",
      messages: [{ role: "user", content: "Describe a person." }],
      response_format: zodResponseFormat(Person, "person"),
      temperature: 1,
      seed,
      max_tokens: 512, // above Person's longest answer: it always stops
    });
    const msg = c.choices[0].message;
    assert.equal(c.choices[0].finish_reason, "stop");
    assert.deepEqual(Person.parse(msg.parsed), msg.parsed);
    assert.deepEqual(JSON.parse(msg.content), msg.parsed);
  }
});

test("responses.parse with zodTextFormat: the Responses API's text.format", async () => {
  const r = await client.responses.parse({
    model: "genq",
    input: "Describe a person.",
    text: { format: zodTextFormat(Person, "person") },
    temperature: 1,
    max_output_tokens: 512,
  });
  assert.equal(r.status, "completed");
  assert.deepEqual(Person.parse(r.output_parsed), r.output_parsed);
});

test("json_object gives a JSON object", async () => {
  const c = await client.chat.completions.create({
    model: "genq",
    messages: [{ role: "user", content: "JSON please." }],
    response_format: { type: "json_object" },
    temperature: 1,
    seed: 4,
    max_tokens: 256,
  });
  if (c.choices[0].finish_reason === "stop") {
    const v = JSON.parse(c.choices[0].message.content);
    assert.equal(typeof v, "object");
    assert.ok(v !== null && !Array.isArray(v));
  } else {
    assert.equal(c.choices[0].finish_reason, "length");
    assert.ok(c.choices[0].message.content.startsWith("{"));
  }
});

test("tools round trip with tool_choice required: call, tool message, final answer", async () => {
  const first = await client.chat.completions.create({
    model: "genq",
    messages: ask,
    tools: [weatherTool, timeTool],
    tool_choice: "required",
    parallel_tool_calls: false,
    temperature: 1,
    seed: 5,
    max_tokens: 512, // above the one call's bound (under 400 bytes): it always ends as a call
  });
  const choice = first.choices[0];
  assert.equal(choice.finish_reason, "tool_calls");
  assert.equal(choice.message.content, null);
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.equal(call.type, "function");
  assert.match(call.id, /^call_/);
  assert.ok(["get_weather", "get_time"].includes(call.function.name));
  const args = JSON.parse(call.function.arguments);
  if (call.function.name === "get_weather") weatherParams.parse(args);
  else assert.ok(["UTC", "CET"].includes(args.zone));

  const second = await client.chat.completions.create({
    model: "genq",
    messages: [...ask, choice.message, { role: "tool", tool_call_id: call.id, content: "Sunny, 21 degrees." }],
    tools: [weatherTool, timeTool],
    tool_choice: "none",
    temperature: 0,
    max_tokens: 8,
  });
  assert.equal(typeof second.choices[0].message.content, "string");
  assert.ok(["stop", "length"].includes(second.choices[0].finish_reason));
  assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens, "the call and its result are part of the prompt");
});

test("a named function is the one called, and zodFunction parses its arguments", async () => {
  const c = await client.chat.completions.parse({
    model: "genq",
    messages: ask,
    tools: [zodFunction({ name: "get_weather", parameters: weatherParams }), timeTool],
    tool_choice: { type: "function", function: { name: "get_weather" } },
    temperature: 1,
    seed: 6,
    max_tokens: 512,
  });
  const calls = c.choices[0].message.tool_calls;
  assert.equal(calls.length, 1);
  assert.equal(calls[0].function.name, "get_weather");
  assert.deepEqual(weatherParams.parse(calls[0].function.parsed_arguments), calls[0].function.parsed_arguments);
});

test("streamed tool-call deltas join into the calls the whole answer gives", async () => {
  const body = {
    model: "genq",
    messages: ask,
    tools: [weatherTool, timeTool],
    tool_choice: "required",
    parallel_tool_calls: false, // one bounded call: parallel ones may run on to max_tokens
    temperature: 1,
    seed: 7,
    max_tokens: 512,
  };
  const whole = await client.chat.completions.create(body);
  const stream = await client.chat.completions.create({ ...body, stream: true });
  const calls = [];
  let finish = null;
  let content = "";
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta ?? {};
    content += delta.content ?? "";
    for (const d of delta.tool_calls ?? []) {
      calls[d.index] ??= { id: "", type: "", function: { name: "", arguments: "" } };
      const c = calls[d.index];
      if (d.id) c.id = d.id;
      if (d.type) c.type = d.type;
      if (d.function?.name) c.function.name += d.function.name;
      c.function.arguments += d.function?.arguments ?? "";
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  // Each request is a job of its own, and a call's id is its job's: the
  // rest of the call is the same, seed for seed.
  const withoutIDs = (cs) =>
    cs.map(({ id, type, function: f }) => (assert.match(id, /^call_\w+_\d+$/), { type, name: f.name, arguments: f.arguments }));
  assert.equal(content, "");
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.equal(finish, "tool_calls");
  assert.deepEqual(withoutIDs(calls), withoutIDs(whole.choices[0].message.tool_calls));
  for (const c of calls) JSON.parse(c.function.arguments);

  // The SDK's own stream helper assembles the same calls.
  const runner = client.chat.completions.stream({ ...body });
  const final = await runner.finalChatCompletion();
  assert.deepEqual(withoutIDs(final.choices[0].message.tool_calls), withoutIDs(whole.choices[0].message.tool_calls));
});

const langchain = (options = {}) =>
  new ChatOpenAI({ model: "genq", apiKey, configuration: { baseURL }, maxRetries: 0, temperature: 1, maxTokens: 512, ...options });

test("LangChain withStructuredOutput(zodSchema)", async () => {
  const person = await langchain({ seed: 8 }).withStructuredOutput(Person, { name: "person" }).invoke("Describe a person.");
  assert.deepEqual(Person.parse(person), person);
});

test("LangChain bindTools with a ToolMessage round trip", async () => {
  const getWeather = tool(async ({ city }) => `Sunny in ${city}.`, {
    name: "get_weather",
    description: "The weather in a city.",
    schema: weatherParams,
  });
  // One call (parallel calls off), bounded by its grammar within maxTokens.
  const model = langchain({ seed: 9 }).bindTools([getWeather], { tool_choice: "required", parallel_tool_calls: false });
  const question = new HumanMessage("What is the weather in Oslo?");
  const ai = await model.invoke([question]);
  assert.equal(ai.tool_calls.length, 1);
  const call = ai.tool_calls[0];
  assert.equal(call.name, "get_weather");
  weatherParams.parse(call.args);
  const result = await getWeather.invoke(call.args);
  const final = await langchain({ temperature: 0, maxTokens: 8 })
    .bindTools([getWeather], { tool_choice: "none" })
    .invoke([question, ai, new ToolMessage({ content: result, tool_call_id: call.id })]);
  assert.equal(typeof final.content, "string");
  assert.equal(final.tool_calls.length, 0);
});

test("the Responses API: function tools, a call, its output, a final answer", async () => {
  const tools = [{ type: "function", name: "get_weather", description: "The weather in a city.", strict: true, parameters: weatherTool.function.parameters }];
  const first = await client.responses.create({
    model: "genq",
    input: "What is the weather in Oslo?",
    tools,
    tool_choice: "required",
    parallel_tool_calls: false,
    temperature: 1,
    max_output_tokens: 512,
  });
  assert.equal(first.status, "completed");
  const calls = first.output.filter((o) => o.type === "function_call");
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, "get_weather");
  assert.match(calls[0].call_id, /^call_/);
  weatherParams.parse(JSON.parse(calls[0].arguments));
  const second = await client.responses.create({
    model: "genq",
    input: [
      { role: "user", content: "What is the weather in Oslo?" },
      ...calls,
      { type: "function_call_output", call_id: calls[0].call_id, output: "Sunny, 21 degrees." },
    ],
    tools,
    tool_choice: "none",
    temperature: 0,
    max_output_tokens: 8,
  });
  assert.equal(typeof second.output_text, "string");
  assert.ok(second.usage.input_tokens > first.usage.input_tokens);
});

test("the Responses API streams a call's arguments as deltas that join into the whole call", async () => {
  const body = {
    model: "genq",
    input: "What is the weather in Oslo?",
    tools: [{ type: "function", name: "get_weather", parameters: weatherTool.function.parameters }],
    tool_choice: "required",
    parallel_tool_calls: false, // one bounded call: parallel ones may run on to max_output_tokens
    temperature: 1,
    max_output_tokens: 512,
  };
  const stream = await client.responses.create({ ...body, stream: true });
  const args = new Map(); // by the call's item id: the model may make several calls
  let done = null;
  for await (const e of stream) {
    if (e.type === "response.function_call_arguments.delta") args.set(e.item_id, (args.get(e.item_id) ?? "") + e.delta);
    if (e.type === "response.completed" || e.type === "response.incomplete") done = e.response;
  }
  const calls = done.output.filter((o) => o.type === "function_call");
  assert.ok(calls.length >= 1, "no call");
  assert.equal(done.status, "completed", `a call was cut`);
  for (const call of calls) {
    assert.equal(args.get(call.id), call.arguments);
    weatherParams.parse(JSON.parse(call.arguments));
  }
});

// The AI SDK's default provider, openai("…"), calls /v1/responses, which
// takes no seed: the answers' limits leave room for the longest call the
// grammar allows, bounded whitespace included.
const aiOpenAI = createOpenAI({ baseURL, apiKey });

test("the AI SDK: generateText with a tool, executed, then answered", async () => {
  let executed = null;
  const res = await generateText({
    model: aiOpenAI("genq"),
    prompt: "What is the weather in Oslo?",
    tools: {
      get_weather: aiTool({
        description: "The weather in a city.",
        inputSchema: weatherParams,
        execute: async (input) => ((executed = input), `Sunny in ${input.city}.`),
      }),
    },
    prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? "required" : "none" }),
    providerOptions: { openai: { parallelToolCalls: false } }, // one bounded call
    stopWhen: stepCountIs(2),
    temperature: 1,
    maxOutputTokens: 512,
    maxRetries: 0,
  });
  assert.equal(res.steps.length, 2);
  assert.equal(res.steps[0].toolCalls[0].toolName, "get_weather");
  assert.deepEqual(weatherParams.parse(executed), executed);
  assert.equal(typeof res.text, "string");
});

test("the AI SDK: generateObject and a streamed tool call", async () => {
  const { object } = await generateObject({ model: aiOpenAI("genq"), schema: Person, prompt: "Describe a person.", temperature: 1, maxOutputTokens: 512, maxRetries: 0 });
  assert.deepEqual(Person.parse(object), object);
  const s = streamText({
    model: aiOpenAI("genq"),
    prompt: "What is the weather in Oslo?",
    tools: { get_weather: aiTool({ inputSchema: weatherParams }) },
    toolChoice: "required",
    providerOptions: { openai: { parallelToolCalls: false } }, // one bounded call
    temperature: 1,
    maxOutputTokens: 512,
    maxRetries: 0,
  });
  const calls = await s.toolCalls;
  assert.equal(calls.length >= 1, true);
  weatherParams.parse(calls[0].input);
});
