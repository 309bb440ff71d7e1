"""Everyday requests to an assistant that no particular skill serves: the background activation measures meaning
against. Written for Mnemo (not taken from any benchmark), fixed, and the same for every project.

Two uses (docs/architecture.md "Skills"):
- per request: how close the message is to ordinary chat (its mean cosine to the nearest of these) compared with
  how close it is to the best skill - a message that is nearer to "write me a poem" than to any skill is a
  request no skill stands out for;
- per skill: how close the skill's own vector is to ordinary chat (its "hubness"); a skill with a generic
  description is near everything, so its cosine says less (cross-domain similarity local scaling, CSLS, the
  usual fix for nearest-neighbour hubs).
"""

from __future__ import annotations

import hashlib

import numpy as np

BACKGROUND_REQUESTS: tuple[str, ...] = (
    # writing
    "write a short poem about the sea",
    "can you write a limerick about my cat",
    "write a bedtime story for a five year old about a brave rabbit",
    "help me write a toast for my sister's wedding",
    "write a thank you note to my neighbour for watering the plants",
    "draft a polite email asking my landlord to fix the heating",
    "write a birthday message for a coworker I barely know",
    "give me a catchy slogan for a lemonade stand",
    "write song lyrics about missing home",
    "help me write a cover letter opening paragraph",
    "make this paragraph sound more friendly",
    "rewrite this sentence so it is shorter",
    "proofread my essay introduction",
    "write a haiku about winter mornings",
    "write a short speech for a retirement party",
    "come up with a name for my book club",
    "write a funny caption for a photo of my dog",
    "help me write an apology to a friend I let down",
    "write a two sentence horror story",
    "describe a sunset in a poetic way",
    # advice and opinion
    "how do I ask my boss for a raise",
    "what should I say in a job interview when asked about my weaknesses",
    "how can I be more productive in the morning",
    "tips for falling asleep faster",
    "how do I deal with a difficult roommate",
    "is it better to rent or buy a house",
    "how do I stop procrastinating",
    "what are good habits for a healthy life",
    "how do I make friends in a new city",
    "should I learn piano or guitar first",
    "how can I become a better public speaker",
    "what do you think about remote work",
    "how do I stay motivated when studying",
    "what is a good way to save money each month",
    "how should I prepare for my first marathon",
    "my friend is sad, how can I cheer her up",
    "what are the pros and cons of having a pet",
    "how do I politely decline an invitation",
    "how do I handle stress at work",
    "give me advice on being a good manager",
    "what is the meaning of life",
    "do you think money can buy happiness",
    "is it rude to recline your seat on a plane",
    "what would you do if you won the lottery",
    "which is better, cats or dogs",
    # explanation and general knowledge
    "explain how photosynthesis works",
    "why is the sky blue",
    "what caused the first world war",
    "explain the theory of relativity in simple terms",
    "how do vaccines work",
    "what is the difference between weather and climate",
    "who was Cleopatra",
    "how do airplanes stay in the air",
    "what is inflation and why does it happen",
    "explain what a black hole is",
    "why do we dream",
    "how does the stock market work in general",
    "what is the tallest mountain in the world",
    "how many bones are in the human body",
    "what is the capital of Australia",
    "explain the water cycle to a child",
    "what are the main causes of climate change",
    "what is the difference between a virus and a bacterium",
    "who invented the telephone",
    "summarize the plot of Romeo and Juliet",
    "what does the word serendipity mean",
    "what is the origin of Halloween",
    "explain supply and demand",
    "how did the Roman empire fall",
    "what is democracy",
    # math and puzzles
    "what is 15 percent of 80",
    "solve for x: 3x + 7 = 22",
    "explain how to calculate the area of a circle",
    "what is the square root of 144",
    "if a train travels 60 miles in 1.5 hours, what is its speed",
    "tell me a riddle",
    "give me a logic puzzle to solve",
    "what is a prime number",
    "convert 5 kilometers to miles in your head",
    "explain probability with a coin flip",
    # everyday planning
    "help me plan a birthday party for ten people",
    "make me a packing list for a weekend camping trip",
    "plan a weekly schedule for studying and exercise",
    "what should I cook for dinner tonight with rice and eggs",
    "give me ideas for a rainy day with kids",
    "how do I organize my closet",
    "suggest a morning routine",
    "what are some fun team building activities",
    "give me a simple workout I can do at home",
    "help me make a grocery list for the week",
    "ideas for a cheap date night",
    "how do I clean a cast iron pan",
    "what should I bring to a potluck",
    "plan a three day trip itinerary in general terms",
    "how do I keep my houseplants alive",
    # language
    "what is the difference between affect and effect",
    "give me a synonym for happy",
    "how do you say good morning in Japanese",
    "correct the grammar in this sentence",
    "what is a metaphor, with an example",
    "teach me a tongue twister",
    "what is the plural of cactus",
    "explain when to use a semicolon",
    # chat and the assistant itself
    "hello, how are you today",
    "tell me a joke",
    "tell me something interesting",
    "what can you do",
    "who are you",
    "thanks, that was helpful",
    "I'm bored, entertain me",
    "let's play twenty questions",
    "tell me a fun fact about octopuses",
    "what's your favourite book",
    "can you keep me company for a bit",
    "good night",
    # summaries and reasoning over given text
    "summarize this article in three bullet points",
    "what is the main idea of this paragraph",
    "give me the key takeaways from this text",
    "turn these notes into a short summary",
    "explain this quote to me",
    "compare these two options and tell me which is better",
    "make a pros and cons list for this decision",
    "brainstorm ten ideas for a school project",
    "give me some conversation starters",
    "help me think through a hard decision",
    # generic questions about software, not about any tool or codebase
    "what does a software engineer do all day",
    "explain what an algorithm is to a beginner",
    "is programming hard to learn",
    "what is the difference between hardware and software",
    "what is artificial intelligence",
    "how does the internet work",
    "what is cloud computing in simple words",
    "explain what a computer virus is",
    "what is a good first programming language",
    "how do I become a developer without a degree",
)


# Turns of a conversation with a coding agent that ask for no new knowledge: carrying on, approving, undoing or
# retrying, asking what was done, pacing. Written for Mnemo (not taken from any benchmark). The context block
# (core/agent/context_block.py) measures a message against them: a message near these ("continue", "undo that")
# with a file open is about the conversation, not about that file's code, so the notes anchored to the file wait
# for the moment the agent reads or edits it (the pre-tool hook) instead of filling the block now. Not a feature
# of the activation model (its coefficients were fitted without it).
CONVERSATION_TURNS: tuple[str, ...] = (
    # carrying on
    "continue", "go ahead", "keep going", "carry on", "next", "do it", "yes please", "ok", "okay, go", "proceed",
    "finish it", "do the rest",
    # approval and thanks
    "looks good", "great, thanks", "perfect", "nice work", "that works", "thank you", "lgtm", "ship it",
    # undo and retry
    "undo that", "revert your last edit", "roll that back", "try again", "that didn't work", "that's wrong",
    "no, not like that", "start over",
    # questions about the conversation
    "why?", "what did you just do", "what changed", "show me what you did", "explain what you did", "what's next",
    "any questions?", "are you done?",
    # workflow steps
    "commit this", "push it", "open a pull request", "run it", "run the tests again", "save the file",
    # pacing and tone
    "wait", "stop", "hold on", "be brief", "hmm", "let me think",
)
CONVERSATION_NEAREST = 3   # a message's closeness to them: its mean cosine to the nearest three

def background_vectors(embedder, cache=None) -> np.ndarray:
    """The background requests embedded like a message, (requests, dim) float32; cached by text hash in the
    skill vector cache (``cache``: a :class:`~.vectors.VectorCache`), so a process embeds them once per model."""
    model = getattr(embedder, "model_id", type(embedder).__name__)
    keys = ["background:" + hashlib.sha256(t.encode("utf-8")).hexdigest()[:32] for t in BACKGROUND_REQUESTS]
    have = cache.get_many(model, keys) if cache is not None else {}
    todo = [i for i, k in enumerate(keys) if k not in have]
    if todo:
        vecs = np.asarray(embedder.embed([BACKGROUND_REQUESTS[i] for i in todo]), dtype=np.float32)
        new = {keys[i]: v for i, v in zip(todo, vecs, strict=True)}
        if cache is not None:
            cache.put_many(model, new)
        have = {**have, **new}
    return np.stack([have[k] for k in keys]).astype(np.float32, copy=False)
