"""The R2S-Eval prompt templates (appendix D.1 and D.7), kept as constants.

Transcribed from the paper with two typographic normalisations: the arrow typeset as
``$\\rightarrow$`` is written "->", and the curly quotes around 'short pause' etc. are
plain apostrophes. One line per printed line; blank lines only between blocks (the
extracted paper text has a blank line after every line, an artefact of extraction).

>>> "{video_name}" in DESCRIPTION_PROMPT and "{desc_block}" in PREFERENCE_PROMPT
True
>>> description_prompt("Stack Blocks").splitlines()[2]
'Your job is to describe the video Stack Blocks with a strict focus on robot motion quality.'
"""

from __future__ import annotations

DESCRIPTION_PROMPT = """You are a professional video analysis and robot behavior evaluation expert.

Your job is to describe the video {video_name} with a strict focus on robot motion quality.

Do NOT give a generic description. Do NOT summarize only the good parts. If there are flaws, even small ones, you must describe them explicitly.

You MUST describe the video through the following four dimensions:

1. Motion Smoothness
- Describe whether movements are steady, fluid, and continuous.
- Mention visible hesitation, jerky motions, jitter, pauses, or unnecessary adjustments.

2. Action Continuity / Temporal Coherence
- Describe whether the action sequence flows naturally from step to step.
- Mention if transitions are abrupt, repetitive, or uncoordinated.
- Identify any breaks in continuity or wasted motions.

3. Task Success / Goal Completion:
- Evaluate task success STRICTLY based on robot actions that are clearly initiated and actually completed in the video.
- Focus ONLY on what the robot demonstrably does, not on what could or should have been done.
- Describe concrete executed substeps (e.g., grasp, lift, place) and whether each substep is successfully completed.
- If any initiated substep is not completed (e.g., grasp attempted but not lifted or placed), you MUST treat it as a failure for that subtask.
- Explicitly state the final outcome using ONE of the following labels ONLY: successful, partially successful, or failed.
- Do NOT override failed or incomplete execution with an overall success judgment.
- Do NOT infer or assume any additional goals beyond the actions visibly attempted by the robot.
- Ignore untouched objects and background elements unless the robot clearly attempts and fails to interact with them.

4. Force / Effort Control:
- Describe how the robot applies force during contact, grasping, insertion, or placement.
- Indicate whether the applied force appears appropriate, excessive, insufficient, or inconsistent.
- Mention visible signs such as object wobbling, slipping, squeezing, pressing, or repeated force adjustments.
- Focus ONLY on observable effects of force application. Do NOT infer numerical force values.
- If force misapplication contributes to failure or hesitation, describe it explicitly.

Additional Rules:
- Use only what is visible in the video. Do not hallucinate.
- Always describe how the robot executes each key action.
- Use fine-grained temporal terms such as 'short pause', 'minor correction', 'smooth lift', 'slow transition', 'repeated adjustment', etc.
- Focus on the behavior of the robot, not the background unless relevant to the task.

Final Output Format:
Section 1: Motion Smoothness
Section 2: Action Continuity
Section 3: Task Success
Section 4: Force / Effort Control
Section 5: Short Overall Summary"""

_OPENING = ("You are an expert in robotic performance comparison. You must compare Robot A "
            "and Robot B based on action details, continuity, fluidity, and task success, "
            "and clearly determine which robot performs better.")
_CRITERIA = """Your goal is to decide which video is better based ONLY on these criteria:
1. Motion Smoothness
2. Continuity / Fluidity
3. Task Completion
4. Force / Effort Control"""


def _rules(source: str) -> str:
    return f"""Rules:
- Use ONLY the information explicitly stated in the {source}.
- Do NOT hallucinate or infer unstated details.
- Smooth, continuous, steady actions -> positive evidence.
- Jerky, hesitant, or multiple unnecessary adjustments -> negative evidence."""


_PROCEDURE = """Evaluation Procedure (you MUST follow internally, but DO NOT output any analysis):
1. Extract evidence for each video internally.
2. Score each dimension internally.
3. Internally decide which robot performs better."""
_FINAL = """Final Output Rule:
- Output ONLY one uppercase letter: "A" or "B".
- Do NOT output explanations, reasoning, analysis, or any other text."""

# the source's two prompts share their opening, criteria, rules and final rule word for
# word (the rules cite descriptions in one, videos in the other); written once here
PREFERENCE_PROMPT = "\n\n".join([_OPENING, "{desc_block}", _CRITERIA, _rules("descriptions"),
                                  _PROCEDURE, _FINAL])
HUMAN_INSTRUCTIONS = "\n\n".join([_OPENING, "{video_block}", _CRITERIA, _rules("videos"),
                                   _FINAL])

SECTION_TITLES = ("Motion Smoothness", "Action Continuity", "Task Success",
                  "Force / Effort Control", "Short Overall Summary")


def description_prompt(task: str) -> str:
    """The description prompt for a video of ``task`` (no policy information)."""
    return DESCRIPTION_PROMPT.format(video_name=task)


def desc_block(description_a: str, description_b: str) -> str:
    """The ``{desc_block}``: "Robot A: ...\\n\\nRobot B: ..."."""
    return f"Robot A: {description_a}\n\nRobot B: {description_b}"


def preference_prompt(description_a: str, description_b: str) -> str:
    """The preference prompt holding both descriptions.

    >>> preference_prompt("x", "y").count("Robot A: x")
    1
    """
    return PREFERENCE_PROMPT.format(desc_block=desc_block(description_a, description_b))
