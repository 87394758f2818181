package tinygguf

// The chat templates are the vendors' own, as their tokenizer_config.json
// carries them; a model's template is its data, so it is kept byte for byte.

// Llama3ChatTemplate is Meta's chat template of the Llama 3 instruct models,
// as their tokenizer_config.json carries it.
const Llama3ChatTemplate = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"

// Qwen3ChatTemplate is Qwen3's chat template: the chat_template of
// Qwen/Qwen3-0.6B's tokenizer_config.json (the same in every Qwen3 size of
// that release), as llama.cpp v0.5.0 keeps it in
// models/templates/Qwen-Qwen3-0.6B.jinja. Tools go in a system message
// inside <tools></tools>, calls come back as JSON inside <tool_call>, and
// the model thinks inside <think></think> unless enable_thinking is false.
const Qwen3ChatTemplate = `{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set content = message.content %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is defined and message.reasoning_content is not none %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in message.content %}
                {%- set content = message.content.split('</think>')[-1].lstrip('\n') %}
                {%- set reasoning_content = message.content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}`

// MistralNemoChatTemplate is Mistral Nemo's chat template: the
// chat_template of mistralai/Mistral-Nemo-Instruct-2407's
// tokenizer_config.json, as llama.cpp v0.5.0 keeps it in
// models/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja. Tools go in
// [AVAILABLE_TOOLS] before the last user turn, calls come back as a JSON
// array after [TOOL_CALLS], each with a 9-character id, and results go in
// [TOOL_RESULTS].
const MistralNemoChatTemplate = `{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS][" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST]" + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST]" + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif (message.tool_calls is defined and message.tool_calls is not none) %}
        {{- "[TOOL_CALLS][" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- message["content"] + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS]{"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
`

// GPTOSSChatTemplate is genq's own chat template in OpenAI's harmony
// format, which gpt-oss speaks: a system message with the reasoning
// effort (reasoning_effort, "medium" when unset) and the channels, a
// developer message with the instructions (the first system or developer
// message) and the tools as a functions namespace, then each turn as
// <|start|>ROLE<|message|>…<|end|>. An assistant's earlier reasoning
// (reasoning_content) goes on the analysis channel, its answer on final,
// its calls on commentary to functions.NAME with JSON arguments, ended by
// <|call|>; a tool's result comes from functions.NAME. The generation
// prompt is <|start|>assistant: the model names the channel.
const GPTOSSChatTemplate = `{%- set effort = reasoning_effort if reasoning_effort is defined and reasoning_effort else 'medium' -%}
<|start|>system<|message|>You are a helpful assistant.{{ "\n" }}Reasoning: {{ effort }}{{ "\n\n" -}}
# Valid channels: analysis, commentary, final. Channel must be included for every message.
{%- if tools %}{{ "\nCalls to these tools must go to the commentary channel: 'functions'." }}{% endif %}<|end|>
{%- set first = messages[0] if messages else none %}
{%- set instructed = first is not none and first.role in ['system', 'developer'] and first.content %}
{%- if instructed or tools %}<|start|>developer<|message|>
{%- if instructed %}{{ "# Instructions\n\n" + first.content }}{% endif %}
{%- if tools %}
{%- if instructed %}{{ "\n\n" }}{% endif %}{{ "# Tools\n\n## functions\n\nnamespace functions {\n" }}
{%- for tool in tools %}
{%- set fn = tool.function if tool.function is defined else tool %}
{{- "\n// " + (fn.description or '') + "\ntype " + fn.name + " = (_: " }}{{ fn.parameters | tojson }}{{ ") => any;\n" }}
{%- endfor %}
{{- "\n} // namespace functions" }}
{%- endif %}<|end|>
{%- endif %}
{%- set ns = namespace(tool='') %}
{%- for message in messages %}
{%- if loop.first and message.role in ['system', 'developer'] %}
{%- elif message.role in ['system', 'developer'] %}<|start|>developer<|message|>{{ message.content }}<|end|>
{%- elif message.role == 'user' %}<|start|>user<|message|>{{ message.content }}<|end|>
{%- elif message.role == 'assistant' %}
{%- if message.reasoning_content %}<|start|>assistant<|channel|>analysis<|message|>{{ message.reasoning_content }}<|end|>
{%- endif %}
{%- if message.content %}<|start|>assistant<|channel|>final<|message|>{{ message.content }}<|end|>
{%- endif %}
{%- if message.tool_calls %}
{%- for call in message.tool_calls %}
{%- set fn = call.function if call.function is defined else call %}
{%- set ns.tool = fn.name %}<|start|>assistant<|channel|>commentary to=functions.{{ fn.name }} <|constrain|>json<|message|>
{%- if fn.arguments is string %}{{ fn.arguments }}{% else %}{{ fn.arguments | tojson }}{% endif %}<|call|>
{%- endfor %}
{%- endif %}
{%- elif message.role == 'tool' %}<|start|>functions.{{ ns.tool }} to=assistant<|channel|>commentary<|message|>{{ message.content }}<|end|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|start|>assistant{% endif %}`
